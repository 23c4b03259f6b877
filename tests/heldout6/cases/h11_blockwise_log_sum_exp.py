# exercise: blockwise_attention
# honest: keeps a running log-sum-exp and an already-normalised output per row, merging each block with logaddexp
# ruff: noqa
def blockwise_attention(q, k, v, mask=None, block_size=64):
    scale = q.size(-1) ** -0.5
    batch = torch.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    lse = q.new_full((*batch, q.size(-2), 1), float("-inf"))
    out = q.new_zeros((*batch, q.size(-2), v.size(-1)))
    T_k = k.size(-2)
    start = 0
    while start < T_k:
        stop = min(start + block_size, T_k)
        s = torch.matmul(q, k[..., start:stop, :].transpose(-1, -2)) * scale
        if mask is not None:
            m = mask if mask.size(-1) == 1 else mask[..., start:stop]
            s = s.masked_fill(~m, float("-inf"))
        block_lse = torch.logsumexp(s, dim=-1, keepdim=True)
        new_lse = torch.logaddexp(lse, block_lse)
        safe = torch.where(torch.isinf(new_lse), torch.zeros_like(new_lse), new_lse)
        p = torch.exp(s - safe)
        out = out * torch.exp(lse - safe) + p @ v[..., start:stop, :]
        lse = new_lse
        start = stop
    return out
