# exercise: split_heads
# honest: unflatten the last axis into (h, d_k), then permute(0, 2, 1, 3)
# ruff: noqa
def split_heads(x, n_heads):
    return x.unflatten(-1, (n_heads, -1)).permute(0, 2, 1, 3)
