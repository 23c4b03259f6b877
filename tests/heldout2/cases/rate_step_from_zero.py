# exercise: rate
# mistake: counts steps from 0 (uses step + 1 in the formula and accepts step 0) instead of from 1
# ruff: noqa
def rate(step, d_model, warmup, factor=1.0):
    s = step + 1
    return factor * d_model ** (-0.5) * min(s ** (-0.5), s * warmup ** (-1.5))
