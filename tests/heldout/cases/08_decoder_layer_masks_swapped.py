# exercise: DecoderLayer
# mistake: passes src_mask to the self-attention and tgt_mask to the cross-attention (masks swapped)
# ruff: noqa: N806, E741, B905, E501 - a learner's style, kept as written
import torch
from torch import nn

from solutions.feed_forward import PositionwiseFeedForward
from solutions.layer_norm import LayerNorm
from solutions.multi_head import MultiHeadAttention


class DecoderLayer(nn.Module):
    def __init__(self, d_model, n_heads, d_ff, dropout=0.0, norm_first=False):
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, n_heads, dropout)
        self.cross_attn = MultiHeadAttention(d_model, n_heads, dropout)
        self.ffn = PositionwiseFeedForward(d_model, d_ff, dropout)
        self.norm1 = LayerNorm(d_model)
        self.norm2 = LayerNorm(d_model)
        self.norm3 = LayerNorm(d_model)
        self.drop = nn.Dropout(dropout)
        self.norm_first = norm_first

    def forward(self, x: torch.Tensor, memory, src_mask=None, tgt_mask=None) -> torch.Tensor:
        if self.norm_first:
            h = self.norm1(x)
            x = x + self.drop(self.self_attn(h, h, h, src_mask))
            x = x + self.drop(self.cross_attn(self.norm2(x), memory, memory, tgt_mask))
            return x + self.drop(self.ffn(self.norm3(x)))
        x = self.norm1(x + self.drop(self.self_attn(x, x, x, src_mask)))
        x = self.norm2(x + self.drop(self.cross_attn(x, memory, memory, tgt_mask)))
        return self.norm3(x + self.drop(self.ffn(x)))
