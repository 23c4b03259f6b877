# exercise: rate
# honest: math.sqrt and warm-up written as step / warmup**1.5, with an explicit if instead of min
# ruff: noqa
def rate(step, d_model, warmup, factor=1.0):
    if step < 1:
        raise ValueError(f"step is counted from 1; got {step}")
    if step < warmup:
        lr = step / warmup**1.5
    else:
        lr = 1 / math.sqrt(step)
    return factor * lr / math.sqrt(d_model)
