# exercise: blockwise_attention
# mistake: range(0, T_k - block_size + 1, block_size) walks only full blocks, so the shorter last block of keys is never seen
# ruff: noqa
def blockwise_attention(q, k, v, mask=None, block_size=64):
    scale = 1.0 / math.sqrt(q.size(-1))
    T_k = k.size(-2)
    batch = torch.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    m = q.new_full((*batch, q.size(-2), 1), float("-inf"))
    l = q.new_zeros((*batch, q.size(-2), 1))
    acc = q.new_zeros((*batch, q.size(-2), v.size(-1)))
    for s in range(0, T_k - block_size + 1, block_size):
        e = s + block_size
        scores = (q @ k[..., s:e, :].transpose(-2, -1)) * scale
        if mask is not None:
            bm = mask[..., s:e] if mask.size(-1) > 1 else mask
            scores = scores.masked_fill(~bm, float("-inf"))
        m_new = torch.maximum(m, scores.amax(-1, keepdim=True))
        safe = torch.where(torch.isinf(m_new), torch.zeros_like(m_new), m_new)
        p = torch.exp(scores - safe)
        r = torch.exp(m - safe)
        l = l * r + p.sum(-1, keepdim=True)
        acc = acc * r + p @ v[..., s:e, :]
        m = m_new
    return acc / torch.where(l == 0, torch.ones_like(l), l)
