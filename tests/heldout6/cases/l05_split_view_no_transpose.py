# exercise: split_heads
# mistake: views [B, T, D] straight as [B, h, T, d_k] with no transpose, mixing positions and heads
# ruff: noqa
def split_heads(x, n_heads):
    B, T, D = x.shape
    return x.view(B, n_heads, T, D // n_heads)
