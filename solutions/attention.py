"""Lesson 03: scaled dot-product attention."""

import math

import torch
import torch.nn.functional as F

from solutions.validation import check_attention_inputs


def scaled_dot_product_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    mask: torch.Tensor | None = None,
    dropout_p: float = 0.0,
) -> tuple[torch.Tensor, torch.Tensor]:
    """softmax(q k^T / sqrt(d_k)) v, with an optional boolean mask.

    q: [..., T_q, d_k], k: [..., T_k, d_k], v: [..., T_k, d_v]
    mask: Bool, broadcastable to [..., T_q, T_k]; True means "may attend".
    Returns (out [..., T_q, d_v], weights [..., T_q, T_k]).
    A query row whose keys are all masked gets all-zero weights and an
    all-zero output, never NaN (as torch.nn.functional.scaled_dot_product_attention).
    dropout_p drops attention weights (used by MultiHeadAttention in training).
    """
    check_attention_inputs(q, k, v, mask)
    ### BEGIN SOLUTION
    d_k = q.size(-1)
    scores = q @ k.transpose(-2, -1) / math.sqrt(d_k)  # [..., T_q, T_k]
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1)  # each row sums to 1
    if mask is not None:
        weights = weights.masked_fill(~mask, 0.0)  # a fully masked row: NaN -> 0
    weights = F.dropout(weights, dropout_p) if dropout_p > 0 else weights
    return weights @ v, weights  # [..., T_q, d_v], [..., T_q, T_k]
    ### END SOLUTION
