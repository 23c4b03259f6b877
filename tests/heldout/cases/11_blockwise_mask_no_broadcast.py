# exercise: blockwise_attention
# mistake: slices the mask's key axis for every block even when the mask broadcasts over the keys (size 1), which then comes out empty
# ruff: noqa: N806, E741, B905, E501 - a learner's style, kept as written
import math

import torch


def blockwise_attention(q, k, v, mask=None, block_size=64):
    scale = 1.0 / math.sqrt(q.size(-1))
    batch = torch.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    m = q.new_full((*batch, q.size(-2), 1), float("-inf"))
    l = q.new_zeros((*batch, q.size(-2), 1))
    acc = q.new_zeros((*batch, q.size(-2), v.size(-1)))
    for start in range(0, k.size(-2), block_size):
        end = min(start + block_size, k.size(-2))
        s = q @ k[..., start:end, :].transpose(-2, -1) * scale
        if mask is not None:
            s = s.masked_fill(~mask[..., start:end], float("-inf"))
        m_new = torch.maximum(m, s.amax(dim=-1, keepdim=True))
        shift = m_new.masked_fill(m_new == float("-inf"), 0.0)
        p = torch.exp(s - shift)
        r = torch.exp(m - shift)
        l = l * r + p.sum(dim=-1, keepdim=True)
        acc = acc * r + p @ v[..., start:end, :]
        m = m_new
    return acc / l.masked_fill(l == 0, 1.0)
