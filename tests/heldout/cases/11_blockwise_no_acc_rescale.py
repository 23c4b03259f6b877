# exercise: blockwise_attention
# mistake: rescales the running sum l when the maximum rises but forgets to rescale the running output acc
# ruff: noqa: N806, E741, B905, E501 - a learner's style, kept as written
import math

import torch


def blockwise_attention(q, k, v, mask=None, block_size=64):
    scale = 1 / math.sqrt(q.shape[-1])
    batch = torch.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    m = q.new_full((*batch, q.shape[-2], 1), float("-inf"))
    l = q.new_zeros((*batch, q.shape[-2], 1))
    acc = q.new_zeros((*batch, q.shape[-2], v.shape[-1]))
    for start in range(0, k.shape[-2], block_size):
        s = q @ k[..., start : start + block_size, :].transpose(-1, -2) * scale
        if mask is not None:
            blk = mask[..., start : start + block_size] if mask.shape[-1] > 1 else mask
            s = s.masked_fill(~blk, float("-inf"))
        m_new = torch.maximum(m, s.amax(-1, keepdim=True))
        safe = torch.where(torch.isinf(m_new), torch.zeros_like(m_new), m_new)
        p = torch.exp(s - safe)
        l = l * torch.exp(m - safe) + p.sum(-1, keepdim=True)
        acc = acc + p @ v[..., start : start + block_size, :]
        m = m_new
    return acc / torch.where(l == 0, torch.ones_like(l), l)
