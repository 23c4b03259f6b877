# exercise: EncoderLayer
# mistake: post-LN written as x + norm(sublayer(x)): the norm is applied to the sublayer's output before the residual add
# ruff: noqa: N806, E741, B905, E501 - a learner's style, kept as written
import torch
from torch import nn

from solutions.feed_forward import PositionwiseFeedForward
from solutions.layer_norm import LayerNorm
from solutions.multi_head import MultiHeadAttention


class EncoderLayer(nn.Module):
    def __init__(self, d_model, n_heads, d_ff, dropout=0.0, norm_first=False):
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, n_heads, dropout)
        self.ffn = PositionwiseFeedForward(d_model, d_ff, dropout)
        self.norm1 = LayerNorm(d_model)
        self.norm2 = LayerNorm(d_model)
        self.dropout = nn.Dropout(dropout)
        self.norm_first = norm_first

    def forward(self, x: torch.Tensor, src_mask=None) -> torch.Tensor:
        if self.norm_first:
            y = self.norm1(x)
            x = x + self.dropout(self.self_attn(y, y, y, src_mask))
            return x + self.dropout(self.ffn(self.norm2(x)))
        x = x + self.norm1(self.dropout(self.self_attn(x, x, x, src_mask)))
        return x + self.norm2(self.dropout(self.ffn(x)))
