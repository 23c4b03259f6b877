# exercise: rate
# mistake: treats a step below 1 as step 1 (max(step, 1)) instead of raising a ValueError
# ruff: noqa
def rate(step, d_model, warmup, factor=1.0):
    step = max(step, 1)
    return factor * (d_model**-0.5) * min(step**-0.5, step * warmup**-1.5)
