# exercise: rate
# mistake: uses warmup^-0.5 instead of warmup^-1.5 in the warm-up branch, so the rate rises far too steeply
# ruff: noqa
def rate(step, d_model, warmup, factor=1.0):
    if step < 1:
        raise ValueError(f"step must be at least 1, got {step}")
    return factor * d_model**-0.5 * min(step**-0.5, step * warmup**-0.5)
