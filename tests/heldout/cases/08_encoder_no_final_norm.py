# exercise: Encoder
# mistake: creates the final norm but never applies it in forward
# ruff: noqa: N806, E741, B905, E501 - a learner's style, kept as written
import torch
from torch import nn

from solutions.encoder_decoder import EncoderLayer
from solutions.layer_norm import LayerNorm


class Encoder(nn.Module):
    def __init__(self, d_model, n_heads, d_ff, n_layers, dropout=0.0, norm_first=False):
        super().__init__()
        self.layers = nn.ModuleList(
            [EncoderLayer(d_model, n_heads, d_ff, dropout, norm_first) for _ in range(n_layers)]
        )
        self.norm = LayerNorm(d_model)

    def forward(self, x: torch.Tensor, src_mask=None) -> torch.Tensor:
        for layer in self.layers:
            x = layer(x, src_mask)
        return x
