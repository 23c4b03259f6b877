# exercise: rate
# honest: math.sqrt and an if on which side of the warm-up the step is
# ruff: noqa: N806, E741, B905, E501 - a learner's style, kept as written
import math


def rate(step: int, d_model: int, warmup: int, factor: float = 1.0) -> float:
    if step < 1:
        raise ValueError(f"rate: step counts from 1, got {step}")
    if step < warmup:
        scale = step / (warmup * math.sqrt(warmup))
    else:
        scale = 1.0 / math.sqrt(step)
    return factor * scale / math.sqrt(d_model)
