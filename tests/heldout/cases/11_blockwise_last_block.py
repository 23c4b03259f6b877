# exercise: blockwise_attention
# mistake: the loop range(0, T_k - block_size + 1, block_size) skips the last, partial block of keys
# ruff: noqa: N806, E741, B905, E501 - a learner's style, kept as written
import math

import torch


def blockwise_attention(q, k, v, mask=None, block_size=64):
    T_k = k.shape[-2]
    scale = 1.0 / math.sqrt(q.shape[-1])
    batch = torch.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    m = torch.full((*batch, q.shape[-2], 1), float("-inf"), dtype=q.dtype, device=q.device)
    l = torch.zeros((*batch, q.shape[-2], 1), dtype=q.dtype, device=q.device)
    acc = torch.zeros((*batch, q.shape[-2], v.shape[-1]), dtype=q.dtype, device=q.device)
    for start in range(0, max(T_k - block_size + 1, 1), block_size):
        end = start + block_size
        s = torch.matmul(q, k[..., start:end, :].transpose(-2, -1)) * scale
        if mask is not None:
            s = s.masked_fill(~(mask[..., start:end] if mask.shape[-1] > 1 else mask), float("-inf"))
        m_new = torch.maximum(m, s.amax(-1, keepdim=True))
        shift = torch.where(m_new.isinf(), torch.zeros_like(m_new), m_new)
        p = (s - shift).exp()
        r = (m - shift).exp()
        l = l * r + p.sum(-1, keepdim=True)
        acc = acc * r + p @ v[..., start:end, :]
        m = m_new
    return acc / l.clamp_min(1e-30) * (l > 0)
