"""Lesson 02: sinusoidal positional encoding."""

import math

import torch
from torch import nn


def sinusoidal_encoding(max_len: int, d_model: int) -> torch.Tensor:
    """The fixed sinusoidal table of "Attention Is All You Need".

    Returns pe: [max_len, D] with
        pe[pos, 2i]   = sin(pos / 10000^(2i/D))
        pe[pos, 2i+1] = cos(pos / 10000^(2i/D))
    The frequencies 10000^(-2i/D) are computed as exp(-2i * ln(10000) / D).
    An odd d_model is a ValueError: sin and cos come in pairs.
    """
    ### BEGIN SOLUTION
    if d_model % 2 != 0:
        raise ValueError(f"d_model must be even (sin and cos come in pairs), got d_model={d_model}")
    position = torch.arange(max_len, dtype=torch.float32).unsqueeze(1)  # [max_len, 1]
    two_i = torch.arange(0, d_model, 2, dtype=torch.float32)  # [D/2]
    frequency = torch.exp(two_i * (-math.log(10000.0) / d_model))  # [D/2]
    pe = torch.zeros(max_len, d_model)
    pe[:, 0::2] = torch.sin(position * frequency)  # [max_len, D/2]
    pe[:, 1::2] = torch.cos(position * frequency)
    return pe
    ### END SOLUTION


class PositionalEncoding(nn.Module):
    """Add the sinusoidal table to a batch of embeddings, then apply dropout.

    x: [B, T, D]  ->  dropout(x + pe[:T]): [B, T, D]
    The table is a buffer ``pe`` of shape [max_len, D]: it moves with the module
    to another device and is saved in its state_dict, but it is not trained.
    A sequence longer than max_len is a ValueError.
    """

    def __init__(self, d_model: int, max_len: int = 5000, dropout: float = 0.0):
        super().__init__()
        ### BEGIN SOLUTION
        self.register_buffer("pe", sinusoidal_encoding(max_len, d_model))
        self.dropout = nn.Dropout(dropout)
        ### END SOLUTION

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        ### BEGIN SOLUTION
        seq_len, max_len = x.size(1), self.pe.size(0)
        if seq_len > max_len:
            raise ValueError(f"sequence length T={seq_len} exceeds max_len={max_len}")
        return self.dropout(x + self.pe[:seq_len])  # [B, T, D] + [T, D]
        ### END SOLUTION
