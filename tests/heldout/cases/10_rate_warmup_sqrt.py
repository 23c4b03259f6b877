# exercise: rate
# mistake: step * warmup^-0.5 instead of step * warmup^-1.5
# ruff: noqa: N806, E741, B905, E501 - a learner's style, kept as written
def rate(step: int, d_model: int, warmup: int, factor: float = 1.0) -> float:
    if step < 1:
        raise ValueError(f"step must be >= 1, got {step}")
    return factor * d_model**-0.5 * min(step**-0.5, step * warmup**-0.5)
