# exercise: EncoderLayer
# honest: one residual helper method used for both sublayers
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
        self.dropout1 = nn.Dropout(dropout)
        self.dropout2 = nn.Dropout(dropout)
        self.norm_first = norm_first

    def _residual(self, x, norm, drop, sublayer):
        if self.norm_first:
            return x + drop(sublayer(norm(x)))
        return norm(x + drop(sublayer(x)))

    def forward(self, x: torch.Tensor, src_mask=None) -> torch.Tensor:
        x = self._residual(x, self.norm1, self.dropout1, lambda y: self.self_attn(y, y, y, src_mask))
        return self._residual(x, self.norm2, self.dropout2, self.ffn)
