# exercise: rate
# mistake: quietly treats step 0 as step 1 instead of raising a ValueError
# ruff: noqa: N806, E741, B905, E501 - a learner's style, kept as written
def rate(step: int, d_model: int, warmup: int, factor: float = 1.0) -> float:
    if step == 0:
        step = 1
    return factor * (d_model ** (-0.5) * min(step ** (-0.5), step * warmup ** (-1.5)))
