"""Alternative correct implementations of the exercises: the checks must accept every one.

Each is written differently from the reference (einsum, reshape/permute, additive
float masks, torch.var, ...), the way a learner might reasonably write it.
"""

import math

import torch


def attention_einsum(q, k, v, mask=None, dropout_p=0.0):
    """einsum for both products; the mask applied by zeroing after an exp-normalisation."""
    scores = torch.einsum("...qd,...kd->...qk", q, k) / q.size(-1) ** 0.5
    if mask is not None:
        scores = scores.masked_fill(mask.logical_not(), float("-inf"))
    weights = torch.nan_to_num(torch.softmax(scores, dim=-1), nan=0.0)
    return torch.einsum("...qk,...kd->...qd", weights, v), weights


def attention_additive_mask(q, k, v, mask=None, dropout_p=0.0):
    """An additive float mask (0 where allowed, -inf where not), scaled queries first."""
    scores = (q / math.sqrt(q.size(-1))) @ k.mT
    if mask is not None:
        additive = torch.zeros(mask.shape, dtype=scores.dtype, device=scores.device)
        scores = scores + additive.masked_fill(~mask, -math.inf)
        weights = torch.softmax(scores, dim=-1)
        weights = torch.where(mask, weights, torch.zeros_like(weights))
    else:
        weights = torch.softmax(scores, dim=-1)
    return torch.matmul(weights, v), weights


ALTERNATIVES = {
    "scaled_dot_product_attention": [attention_einsum, attention_additive_mask],
}
