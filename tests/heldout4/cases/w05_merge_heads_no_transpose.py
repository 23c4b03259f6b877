# exercise: merge_heads
# mistake: views [B, h, T, d_k] straight as [B, T, D] without transposing the heads back first
# ruff: noqa
def merge_heads(x):
    batch, n_heads, seq_len, d_k = x.shape
    return x.contiguous().view(batch, seq_len, n_heads * d_k)
