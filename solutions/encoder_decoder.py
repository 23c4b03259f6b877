"""Lesson 08: encoder and decoder layers, and their stacks."""

import torch
from torch import nn

from solutions.feed_forward import PositionwiseFeedForward
from solutions.layer_norm import LayerNorm
from solutions.multi_head import MultiHeadAttention


class EncoderLayer(nn.Module):
    """Self-attention then a feed-forward network, each wrapped in a residual connection.

    x: [B, T, D], src_mask: Bool broadcastable to [B, h, T, T] -> [B, T, D]
    Post-LN (the paper, default): x = norm(x + dropout(sublayer(x))).
    Pre-LN (norm_first=True):     x = x + dropout(sublayer(norm(x))).
    Equals torch.nn.TransformerEncoderLayer(batch_first=True) with the same weights.
    """

    def __init__(self, d_model: int, n_heads: int, d_ff: int, dropout: float = 0.0, norm_first: bool = False):
        super().__init__()
        ### BEGIN SOLUTION
        self.self_attn = MultiHeadAttention(d_model, n_heads, dropout)
        self.ffn = PositionwiseFeedForward(d_model, d_ff, dropout)
        self.norm1 = LayerNorm(d_model)
        self.norm2 = LayerNorm(d_model)
        self.dropout1 = nn.Dropout(dropout)
        self.dropout2 = nn.Dropout(dropout)
        self.norm_first = norm_first
        ### END SOLUTION

    def forward(self, x: torch.Tensor, src_mask: torch.Tensor | None = None) -> torch.Tensor:
        ### BEGIN SOLUTION
        if self.norm_first:
            h = self.norm1(x)
            x = x + self.dropout1(self.self_attn(h, h, h, src_mask))
            x = x + self.dropout2(self.ffn(self.norm2(x)))
        else:
            x = self.norm1(x + self.dropout1(self.self_attn(x, x, x, src_mask)))
            x = self.norm2(x + self.dropout2(self.ffn(x)))
        return x  # [B, T, D]
        ### END SOLUTION


class DecoderLayer(nn.Module):
    """Masked self-attention, cross-attention over the encoder's memory, then a feed-forward network.

    x: [B, T_tgt, D], memory: [B, T_src, D]
    tgt_mask: broadcastable to [B, h, T_tgt, T_tgt] (causal, often with padding)
    src_mask: broadcastable to [B, h, T_tgt, T_src] (padding of the source)
    In cross-attention the queries come from the decoder, keys and values from memory.
    Equals torch.nn.TransformerDecoderLayer(batch_first=True) with the same weights.
    """

    def __init__(self, d_model: int, n_heads: int, d_ff: int, dropout: float = 0.0, norm_first: bool = False):
        super().__init__()
        ### BEGIN SOLUTION
        self.self_attn = MultiHeadAttention(d_model, n_heads, dropout)
        self.cross_attn = MultiHeadAttention(d_model, n_heads, dropout)
        self.ffn = PositionwiseFeedForward(d_model, d_ff, dropout)
        self.norm1 = LayerNorm(d_model)
        self.norm2 = LayerNorm(d_model)
        self.norm3 = LayerNorm(d_model)
        self.dropout1 = nn.Dropout(dropout)
        self.dropout2 = nn.Dropout(dropout)
        self.dropout3 = nn.Dropout(dropout)
        self.norm_first = norm_first
        ### END SOLUTION

    def forward(
        self,
        x: torch.Tensor,
        memory: torch.Tensor,
        src_mask: torch.Tensor | None = None,
        tgt_mask: torch.Tensor | None = None,
    ) -> torch.Tensor:
        ### BEGIN SOLUTION
        if self.norm_first:
            h = self.norm1(x)
            x = x + self.dropout1(self.self_attn(h, h, h, tgt_mask))
            h = self.norm2(x)
            x = x + self.dropout2(self.cross_attn(h, memory, memory, src_mask))
            x = x + self.dropout3(self.ffn(self.norm3(x)))
        else:
            x = self.norm1(x + self.dropout1(self.self_attn(x, x, x, tgt_mask)))
            x = self.norm2(x + self.dropout2(self.cross_attn(x, memory, memory, src_mask)))
            x = self.norm3(x + self.dropout3(self.ffn(x)))
        return x  # [B, T_tgt, D]
        ### END SOLUTION


class Encoder(nn.Module):
    """n_layers encoder layers in a ModuleList ``layers``, then a final LayerNorm ``norm``.

    x: [B, T, D] -> [B, T, D]
    """

    def __init__(
        self,
        d_model: int,
        n_heads: int,
        d_ff: int,
        n_layers: int,
        dropout: float = 0.0,
        norm_first: bool = False,
    ):
        super().__init__()
        ### BEGIN SOLUTION
        self.layers = nn.ModuleList(
            EncoderLayer(d_model, n_heads, d_ff, dropout, norm_first) for _ in range(n_layers)
        )
        self.norm = LayerNorm(d_model)
        ### END SOLUTION

    def forward(self, x: torch.Tensor, src_mask: torch.Tensor | None = None) -> torch.Tensor:
        ### BEGIN SOLUTION
        for layer in self.layers:
            x = layer(x, src_mask)
        return self.norm(x)
        ### END SOLUTION


class Decoder(nn.Module):
    """n_layers decoder layers in a ModuleList ``layers``, then a final LayerNorm ``norm``.

    x: [B, T_tgt, D], memory: [B, T_src, D] -> [B, T_tgt, D]
    """

    def __init__(
        self,
        d_model: int,
        n_heads: int,
        d_ff: int,
        n_layers: int,
        dropout: float = 0.0,
        norm_first: bool = False,
    ):
        super().__init__()
        ### BEGIN SOLUTION
        self.layers = nn.ModuleList(
            DecoderLayer(d_model, n_heads, d_ff, dropout, norm_first) for _ in range(n_layers)
        )
        self.norm = LayerNorm(d_model)
        ### END SOLUTION

    def forward(
        self,
        x: torch.Tensor,
        memory: torch.Tensor,
        src_mask: torch.Tensor | None = None,
        tgt_mask: torch.Tensor | None = None,
    ) -> torch.Tensor:
        ### BEGIN SOLUTION
        for layer in self.layers:
            x = layer(x, memory, src_mask, tgt_mask)
        return self.norm(x)
        ### END SOLUTION
