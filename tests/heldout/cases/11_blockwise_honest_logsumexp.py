# exercise: blockwise_attention
# honest: keeps a running log-sum-exp per query and merges each block's normalised output with logaddexp weights
# ruff: noqa: N806, E741, B905, E501 - a learner's style, kept as written
import math

import torch


def blockwise_attention(q, k, v, mask=None, block_size=64):
    scale = q.size(-1) ** -0.5
    batch = torch.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    lse = q.new_full((*batch, q.size(-2), 1), -math.inf)
    out = q.new_zeros((*batch, q.size(-2), v.size(-1)))
    for start in range(0, k.size(-2), block_size):
        stop = min(start + block_size, k.size(-2))
        s = torch.matmul(q * scale, k[..., start:stop, :].transpose(-1, -2))
        if mask is not None:
            keep = mask if mask.size(-1) == 1 else mask[..., start:stop]
            s = s.masked_fill(keep.logical_not(), -math.inf)
        block_lse = torch.logsumexp(s, dim=-1, keepdim=True)
        new_lse = torch.logaddexp(lse, block_lse)
        safe = torch.where(torch.isfinite(new_lse), new_lse, torch.zeros_like(new_lse))
        out = out * torch.exp(lse - safe) + torch.exp(s - safe) @ v[..., start:stop, :]
        lse = new_lse
    return out
