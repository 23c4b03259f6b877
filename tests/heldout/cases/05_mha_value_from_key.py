# exercise: MultiHeadAttention
# mistake: projects the key tensor for the values too (w_v(key) instead of w_v(value))
# ruff: noqa: N806, E741, B905, E501 - a learner's style, kept as written
from torch import nn

from solutions.attention import scaled_dot_product_attention
from solutions.multi_head import merge_heads, split_heads


class MultiHeadAttention(nn.Module):
    def __init__(self, d_model: int, n_heads: int, dropout: float = 0.0):
        super().__init__()
        if d_model % n_heads:
            raise ValueError(f"d_model ({d_model}) must be divisible by n_heads ({n_heads})")
        self.h = n_heads
        self.w_q = nn.Linear(d_model, d_model)
        self.w_k = nn.Linear(d_model, d_model)
        self.w_v = nn.Linear(d_model, d_model)
        self.w_o = nn.Linear(d_model, d_model)
        self.p = dropout
        self.attn = None

    def forward(self, query, key, value, mask=None):
        q = split_heads(self.w_q(query), self.h)
        k = split_heads(self.w_k(key), self.h)
        v = split_heads(self.w_v(key), self.h)
        out, self.attn = scaled_dot_product_attention(q, k, v, mask, self.p if self.training else 0.0)
        return self.w_o(merge_heads(out))
