# exercise: blockwise_attention
# mistake: when a block raises the running maximum, the running sum is rescaled but the running output acc is not
# ruff: noqa
def blockwise_attention(q, k, v, mask=None, block_size=64):
    scale = q.size(-1) ** -0.5
    shape = torch.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    m = q.new_full((*shape, q.size(-2), 1), float("-inf"))
    l = q.new_zeros((*shape, q.size(-2), 1))
    acc = q.new_zeros((*shape, q.size(-2), v.size(-1)))
    for s in range(0, k.size(-2), block_size):
        e = min(s + block_size, k.size(-2))
        sc = (q @ k[..., s:e, :].transpose(-1, -2)) * scale
        if mask is not None:
            bm = mask[..., s:e] if mask.size(-1) > 1 else mask
            sc = sc.masked_fill(~bm, float("-inf"))
        m_new = torch.maximum(m, sc.amax(-1, keepdim=True))
        safe = torch.where(torch.isinf(m_new), torch.zeros_like(m_new), m_new)
        p = torch.exp(sc - safe)
        l = l * torch.exp(m - safe) + p.sum(-1, keepdim=True)
        acc = acc + p @ v[..., s:e, :]
        m = m_new
    return acc / torch.where(l == 0, torch.ones_like(l), l)
