# exercise: merge_heads
# honest: permute back and flatten the last two axes (reshape copies when needed)
# ruff: noqa
def merge_heads(x):
    return x.permute(0, 2, 1, 3).flatten(start_dim=2)
