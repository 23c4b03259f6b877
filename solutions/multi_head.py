"""Lesson 05: multi-head attention."""

import torch
from torch import nn

from solutions.attention import scaled_dot_product_attention


def split_heads(x: torch.Tensor, n_heads: int) -> torch.Tensor:
    """[B, T, D] -> [B, h, T, d_k]: view the last axis as h blocks of d_k, then move h forward."""
    ### BEGIN SOLUTION
    batch, seq_len, d_model = x.shape
    return x.view(batch, seq_len, n_heads, d_model // n_heads).transpose(1, 2)
    ### END SOLUTION


def merge_heads(x: torch.Tensor) -> torch.Tensor:
    """[B, h, T, d_k] -> [B, T, D]: the inverse of split_heads (transpose back, then view)."""
    ### BEGIN SOLUTION
    batch, n_heads, seq_len, d_k = x.shape
    return x.transpose(1, 2).contiguous().view(batch, seq_len, n_heads * d_k)
    ### END SOLUTION


class MultiHeadAttention(nn.Module):
    """h attention heads in parallel, each in its own d_k = D / h subspace.

    query: [B, T_q, D], key and value: [B, T_k, D]; mask: Bool broadcastable
    to [B, h, T_q, T_k] (a [T_q, T_k] causal mask or a [B, 1, 1, T_k] padding
    mask both work). Returns [B, T_q, D] and keeps the last attention
    weights in ``self.attn``: [B, h, T_q, T_k].
    Sub-layers, in this order: w_q, w_k, w_v, w_o, each nn.Linear(D, D).
    """

    def __init__(self, d_model: int, n_heads: int, dropout: float = 0.0):
        super().__init__()
        ### BEGIN SOLUTION
        if d_model % n_heads != 0:
            raise ValueError(
                f"d_model must be divisible by n_heads, got d_model={d_model}, n_heads={n_heads}"
            )
        self.n_heads = n_heads
        self.w_q = nn.Linear(d_model, d_model)
        self.w_k = nn.Linear(d_model, d_model)
        self.w_v = nn.Linear(d_model, d_model)
        self.w_o = nn.Linear(d_model, d_model)
        self.dropout = dropout
        self.attn = None
        ### END SOLUTION

    def forward(
        self,
        query: torch.Tensor,
        key: torch.Tensor,
        value: torch.Tensor,
        mask: torch.Tensor | None = None,
    ) -> torch.Tensor:
        ### BEGIN SOLUTION
        q = split_heads(self.w_q(query), self.n_heads)  # [B, h, T_q, d_k]
        k = split_heads(self.w_k(key), self.n_heads)  # [B, h, T_k, d_k]
        v = split_heads(self.w_v(value), self.n_heads)  # [B, h, T_k, d_k]
        dropout_p = self.dropout if self.training else 0.0
        out, self.attn = scaled_dot_product_attention(q, k, v, mask, dropout_p)
        return self.w_o(merge_heads(out))  # [B, T_q, D]
        ### END SOLUTION
