# exercise: split_heads
# mistake: views [B, T, D] straight as [B, h, T, d_k] with no transpose, mixing positions across heads
# ruff: noqa
def split_heads(x, n_heads):
    batch, seq_len, d_model = x.shape
    return x.view(batch, n_heads, seq_len, d_model // n_heads)
