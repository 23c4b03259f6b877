# exercise: blockwise_attention
# mistake: no guard for a query whose keys are all masked: exp(-inf - (-inf)) gives NaN instead of zeros
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
            s = s.masked_fill(~(mask[..., start:end] if mask.size(-1) > 1 else mask), float("-inf"))
        m_new = torch.maximum(m, s.amax(dim=-1, keepdim=True))
        p = torch.exp(s - m_new)
        alpha = torch.exp(m - m_new)
        l = alpha * l + p.sum(dim=-1, keepdim=True)
        acc = alpha * acc + p @ v[..., start:end, :]
        m = m_new
    return acc / l
