# exercise: blockwise_attention
# mistake: range(0, T_k - block_size + 1, block_size): a shorter last block is never visited
# ruff: noqa
def blockwise_attention(q, k, v, mask=None, block_size=64):
    scale = q.size(-1) ** -0.5
    T_k = k.size(-2)
    batch = torch.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    m = q.new_full((*batch, q.size(-2), 1), float("-inf"))
    l = q.new_zeros((*batch, q.size(-2), 1))
    acc = q.new_zeros((*batch, q.size(-2), v.size(-1)))
    for start in range(0, T_k - block_size + 1, block_size):
        end = start + block_size
        s = (q @ k[..., start:end, :].transpose(-2, -1)) * scale
        if mask is not None:
            blk = mask[..., start:end] if mask.size(-1) > 1 else mask
            s = s.masked_fill(~blk, float("-inf"))
        m_new = torch.maximum(m, s.amax(dim=-1, keepdim=True))
        safe = m_new.masked_fill(torch.isinf(m_new), 0.0)
        p = torch.exp(s - safe)
        alpha = torch.exp(m - safe)
        l = l * alpha + p.sum(dim=-1, keepdim=True)
        acc = acc * alpha + p @ v[..., start:end, :]
        m = m_new
    return acc / l.clamp_min(1e-30) * (l > 0)
