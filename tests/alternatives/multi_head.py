"""Alternative correct implementations of lesson 05's exercises: the checks must accept every one."""

import math

import torch
import torch.nn.functional as F
from torch import nn


def split_heads_chunk(x, n_heads):
    """Chunk the features into h blocks and stack them on a new heads axis."""
    return torch.stack(torch.chunk(x, n_heads, dim=-1), dim=1)


def split_heads_permute(x, n_heads):
    """reshape with -1 and permute (a copy-free view in the other spelling)."""
    b, t, _ = x.shape
    return x.reshape(b, t, n_heads, -1).permute(0, 2, 1, 3)


def split_heads_unflatten(x, n_heads):
    """unflatten the last axis, then movedim the heads in front of T."""
    return x.unflatten(-1, (n_heads, -1)).movedim(2, 1)


def merge_heads_cat(x):
    """Concatenate the heads along the features, head 0 first."""
    return torch.cat(x.unbind(dim=1), dim=-1)


def merge_heads_reshape(x):
    """permute back and reshape (which copies when it must, so no .contiguous())."""
    b, h, t, d_k = x.shape
    return x.permute(0, 2, 1, 3).reshape(b, t, h * d_k)


def merge_heads_flatten(x):
    return x.transpose(1, 2).flatten(start_dim=2)


class MultiHeadAttentionEinsum(nn.Module):
    """einsum over the weight matrices, heads as an einsum axis; own masked softmax; F.dropout
    with training=self.training."""

    def __init__(self, d_model, n_heads, dropout=0.0):
        super().__init__()
        if d_model % n_heads:
            raise ValueError(f"d_model={d_model} is not divisible by n_heads={n_heads}")
        self.h, self.d_k, self.p = n_heads, d_model // n_heads, dropout
        self.w_q, self.w_k, self.w_v, self.w_o = (nn.Linear(d_model, d_model) for _ in range(4))
        self.attn = None

    def _project(self, linear, x):
        weight = linear.weight.view(self.h, self.d_k, -1)  # [h, d_k, D]
        return torch.einsum("btd,hkd->bhtk", x, weight) + linear.bias.view(1, self.h, 1, self.d_k)

    def forward(self, query, key, value, mask=None):
        q, k, v = self._project(self.w_q, query), self._project(self.w_k, key), self._project(self.w_v, value)
        scores = torch.einsum("bhqd,bhkd->bhqk", q, k) / math.sqrt(self.d_k)
        if mask is not None:
            scores = scores.masked_fill(mask.logical_not(), float("-inf"))
        self.attn = torch.nan_to_num(scores.softmax(dim=-1), nan=0.0)
        weights = F.dropout(self.attn, self.p, training=self.training)
        heads = torch.einsum("bhqk,bhkd->bqhd", weights, v)
        return self.w_o(heads.flatten(start_dim=2))


class MultiHeadAttentionFused(nn.Module):
    """Fused QKV projection for self-attention (one matmul with the stacked weights),
    PyTorch's F.scaled_dot_product_attention for the output, weights computed beside it."""

    def __init__(self, d_model, n_heads, dropout=0.0):
        super().__init__()
        if d_model % n_heads != 0:
            raise ValueError("d_model must be divisible by n_heads")
        self.n_heads = n_heads
        self.w_q = nn.Linear(d_model, d_model)
        self.w_k = nn.Linear(d_model, d_model)
        self.w_v = nn.Linear(d_model, d_model)
        self.w_o = nn.Linear(d_model, d_model)
        self.dropout = nn.Dropout(dropout)
        self.attn = None

    def _heads(self, x):
        return split_heads_permute(x, self.n_heads)

    def forward(self, query, key, value, mask=None):
        if query is key and key is value:
            weight = torch.cat([self.w_q.weight, self.w_k.weight, self.w_v.weight])
            bias = torch.cat([self.w_q.bias, self.w_k.bias, self.w_v.bias])
            q, k, v = F.linear(query, weight, bias).chunk(3, dim=-1)
        else:
            q, k, v = self.w_q(query), self.w_k(key), self.w_v(value)
        q, k, v = self._heads(q), self._heads(k), self._heads(v)
        scores = (q / math.sqrt(q.size(-1))) @ k.mT
        if mask is not None:
            additive = torch.zeros(mask.shape, dtype=scores.dtype, device=scores.device)
            scores = scores + additive.masked_fill(~mask, -math.inf)
            weights = torch.where(mask, torch.softmax(scores, dim=-1), 0.0)
        else:
            weights = torch.softmax(scores, dim=-1)
        self.attn = weights
        dropout_p = self.dropout.p if self.training else 0.0
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout_p)
        return self.w_o(merge_heads_reshape(out))


class MultiHeadAttentionHeadsLast(nn.Module):
    """Heads viewed to [B, T, h, d_k] and never transposed: einsum names the axes, so attention
    still runs over the positions of each head (right, though it looks like the named mistake)."""

    def __init__(self, d_model, n_heads, dropout=0.0):
        super().__init__()
        if d_model % n_heads:
            raise ValueError("d_model % n_heads != 0")
        self.n_heads = n_heads
        self.dropout = nn.Dropout(dropout)
        self.w_q, self.w_k, self.w_v, self.w_o = (nn.Linear(d_model, d_model) for _ in range(4))

    def forward(self, query, key, value, mask=None):
        b, t_q, d = query.shape
        q, k, v = (
            w(x).view(b, x.size(1), self.n_heads, d // self.n_heads)
            for w, x in ((self.w_q, query), (self.w_k, key), (self.w_v, value))
        )
        scores = torch.einsum("bqhd,bkhd->bhqk", q, k) / math.sqrt(d // self.n_heads)
        if mask is not None:
            scores = scores.masked_fill(~mask, -math.inf)
        weights = torch.softmax(scores, dim=-1)
        self.attn = weights if mask is None else weights.masked_fill(~mask, 0.0)
        heads = torch.einsum("bhqk,bkhd->bqhd", self.dropout(self.attn), v)
        return self.w_o(heads.reshape(b, t_q, d))


class MultiHeadAttentionDropoutModule(nn.Module):
    """Attention weights dropped by an nn.Dropout module (off after .eval()), heads through
    unflatten and flatten, masked entries set by torch.where."""

    def __init__(self, d_model, n_heads, dropout=0.0):
        super().__init__()
        if d_model % n_heads != 0:
            raise ValueError(f"n_heads={n_heads} does not divide d_model={d_model}")
        self.n_heads = n_heads
        self.w_q, self.w_k, self.w_v, self.w_o = (nn.Linear(d_model, d_model) for _ in range(4))
        self.attention_dropout = nn.Dropout(dropout)

    def forward(self, query, key, value, mask=None):
        q, k, v = (
            split_heads_unflatten(w(x), self.n_heads)
            for w, x in zip((self.w_q, self.w_k, self.w_v), (query, key, value), strict=True)
        )
        scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
        if mask is not None:
            scores = torch.where(mask, scores, -math.inf)
        weights = torch.softmax(scores, dim=-1)
        if mask is not None:
            weights = torch.where(mask, weights, 0.0)
        self.attn = weights
        return self.w_o(merge_heads_flatten(self.attention_dropout(weights) @ v))


ALTERNATIVES = {
    "split_heads": [split_heads_chunk, split_heads_permute, split_heads_unflatten],
    "merge_heads": [merge_heads_cat, merge_heads_reshape, merge_heads_flatten],
    "MultiHeadAttention": [
        MultiHeadAttentionEinsum,
        MultiHeadAttentionFused,
        MultiHeadAttentionHeadsLast,
        MultiHeadAttentionDropoutModule,
    ],
}
