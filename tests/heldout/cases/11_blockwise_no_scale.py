# exercise: blockwise_attention
# mistake: forgets the 1/sqrt(d_k) scale on the block scores
# ruff: noqa: N806, E741, B905, E501 - a learner's style, kept as written
import torch


def blockwise_attention(q, k, v, mask=None, block_size=64):
    batch = torch.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    rows = (*batch, q.size(-2), 1)
    m = q.new_full(rows, float("-inf"))
    l = q.new_zeros(rows)
    acc = q.new_zeros((*batch, q.size(-2), v.size(-1)))
    for start in range(0, k.size(-2), block_size):
        end = min(start + block_size, k.size(-2))
        scores = q @ k[..., start:end, :].transpose(-2, -1)
        if mask is not None:
            scores = scores.masked_fill(~(mask[..., start:end] if mask.size(-1) > 1 else mask), float("-inf"))
        m_new = torch.maximum(m, scores.amax(-1, keepdim=True))
        shift = m_new.masked_fill(m_new == float("-inf"), 0.0)
        w = torch.exp(scores - shift)
        r = torch.exp(m - shift)
        l = l * r + w.sum(-1, keepdim=True)
        acc = acc * r + w @ v[..., start:end, :]
        m = m_new
    return acc / l.masked_fill(l == 0, 1.0)
