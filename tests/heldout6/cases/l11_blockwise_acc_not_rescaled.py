# exercise: blockwise_attention
# mistake: when a block raises the running maximum, rescales the running sum but not the running output
# ruff: noqa
def blockwise_attention(q, k, v, mask=None, block_size=64):
    scale = 1.0 / math.sqrt(q.size(-1))
    batch = torch.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    m = q.new_full((*batch, q.size(-2), 1), float("-inf"))
    l = q.new_zeros((*batch, q.size(-2), 1))
    acc = q.new_zeros((*batch, q.size(-2), v.size(-1)))
    for s in range(0, k.size(-2), block_size):
        e = s + block_size
        scores = (q @ k[..., s:e, :].transpose(-2, -1)) * scale
        if mask is not None:
            bm = mask[..., s:e] if mask.size(-1) > 1 else mask
            scores = scores.masked_fill(~bm, float("-inf"))
        m_new = torch.maximum(m, scores.amax(-1, keepdim=True))
        safe = torch.where(torch.isinf(m_new), torch.zeros_like(m_new), m_new)
        p = torch.exp(scores - safe)
        l = l * torch.exp(m - safe) + p.sum(-1, keepdim=True)
        acc = acc + p @ v[..., s:e, :]
        m = m_new
    return acc / torch.where(l == 0, torch.ones_like(l), l)
