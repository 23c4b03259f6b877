# exercise: MultiHeadAttention
# honest: splits and merges heads inline with reshape/permute, attention written out in the forward
# ruff: noqa: N806, E741, B905, E501 - a learner's style, kept as written
import math

import torch
from torch import nn


class MultiHeadAttention(nn.Module):
    def __init__(self, d_model: int, n_heads: int, dropout: float = 0.0):
        super().__init__()
        if d_model % n_heads != 0:
            raise ValueError(f"d_model={d_model} is not divisible by n_heads={n_heads}")
        self.n_heads, self.d_k = n_heads, d_model // n_heads
        self.w_q = nn.Linear(d_model, d_model)
        self.w_k = nn.Linear(d_model, d_model)
        self.w_v = nn.Linear(d_model, d_model)
        self.w_o = nn.Linear(d_model, d_model)
        self.dropout = nn.Dropout(dropout)
        self.attn = None

    def forward(self, query, key, value, mask=None):
        B = query.shape[0]
        q = self.w_q(query).reshape(B, -1, self.n_heads, self.d_k).permute(0, 2, 1, 3)
        k = self.w_k(key).reshape(B, -1, self.n_heads, self.d_k).permute(0, 2, 1, 3)
        v = self.w_v(value).reshape(B, -1, self.n_heads, self.d_k).permute(0, 2, 1, 3)
        scores = q @ k.transpose(-1, -2) / math.sqrt(self.d_k)
        if mask is not None:
            scores = scores.masked_fill(mask.logical_not(), float("-inf"))
        weights = torch.softmax(scores, dim=-1).nan_to_num(0.0)
        self.attn = weights
        out = self.dropout(weights) @ v
        return self.w_o(out.permute(0, 2, 1, 3).reshape(B, -1, self.n_heads * self.d_k))
