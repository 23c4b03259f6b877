# exercise: rate
# mistake: quietly treats step 0 as step 1 (as the Annotated Transformer does) instead of raising a ValueError
# ruff: noqa
def rate(step, d_model, warmup, factor=1.0):
    if step == 0:
        step = 1
    return factor * (d_model ** (-0.5) * min(step ** (-0.5), step * warmup ** (-1.5)))
