"""Alternative correct implementations of lesson 02's sinusoidal_encoding and PositionalEncoding."""

import math

import torch
import torch.nn.functional as F
from torch import nn


def sinusoidal_pow_stack(max_len, d_model):
    """Frequencies by a power in float64, sin and cos interleaved by stack + reshape, returned as float32."""
    if d_model % 2:
        raise ValueError("d_model must be even")
    position = torch.arange(max_len, dtype=torch.float64)[:, None]
    frequency = 10000.0 ** (-torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)
    angle = position * frequency  # [max_len, D/2]
    return torch.stack((angle.sin(), angle.cos()), dim=-1).reshape(max_len, d_model).float()


def sinusoidal_python_loops(max_len, d_model):
    """Python's math entry by entry, one rate per column pair."""
    if d_model % 2 != 0:
        raise ValueError(f"odd d_model={d_model}")
    rows = []
    for pos in range(max_len):
        row = []
        for i in range(d_model // 2):
            angle = pos / math.pow(10000, 2 * i / d_model)
            row += [math.sin(angle), math.cos(angle)]
        rows.append(row)
    return torch.tensor(rows).reshape(max_len, d_model)


def sinusoidal_where(max_len, d_model):
    """One angle per column (the pair's rate repeated twice), then sin or cos chosen by parity."""
    if d_model % 2 == 1:
        raise ValueError("sin and cos come in pairs")
    rates = 1.0 / torch.pow(torch.tensor(10000.0), torch.arange(0, d_model, 2) / d_model)
    angle = torch.arange(max_len).unsqueeze(1) * rates.repeat_interleave(2)  # [max_len, D]
    even = (torch.arange(d_model) % 2 == 0).unsqueeze(0)
    return torch.where(even, torch.sin(angle), torch.cos(angle))


def sinusoidal_halves_interleaved(max_len, d_model):
    """Sines and cosines built in two halves, as tensor2tensor does, with the paper's frequencies
    2i/D (the 2 written out beside the pair index), then interleaved by a view and a transpose."""
    if d_model % 2:
        raise ValueError("d_model must be even")
    pair = torch.arange(d_model // 2, dtype=torch.float32)
    angle = torch.arange(max_len, dtype=torch.float32)[:, None] * torch.exp(
        2 * pair * (-math.log(10000.0) / d_model)
    )
    halves = torch.cat([torch.sin(angle), torch.cos(angle)], dim=1)  # [max_len, D]: sines, then cosines
    return halves.view(max_len, 2, d_model // 2).transpose(1, 2).reshape(max_len, d_model)


class PositionalEncodingFunctional(nn.Module):
    """Its own table; F.dropout with the training flag; narrow() for the first T rows; IndexError
    turned into ValueError."""

    def __init__(self, d_model, max_len=5000, dropout=0.0):
        super().__init__()
        self.p = dropout
        self.register_buffer("pe", sinusoidal_pow_stack(max_len, d_model))

    def forward(self, x):
        length = x.shape[-2]
        if length > len(self.pe):
            raise ValueError(f"sequence of {length} positions, table of {len(self.pe)}")
        return F.dropout(x + self.pe.narrow(0, 0, length).unsqueeze(0), self.p, self.training)


class PositionalEncodingTorchAdd(nn.Module):
    """A table built in a loop; torch.add with an explicit batch axis; nn.Dropout."""

    def __init__(self, d_model, max_len=5000, dropout=0.0):
        super().__init__()
        pe = torch.empty(max_len, d_model)
        for column in range(0, d_model, 2):
            angle = torch.arange(max_len) * math.exp(-column * math.log(10000.0) / d_model)
            pe[:, column], pe[:, column + 1] = torch.sin(angle), torch.cos(angle)
        self.register_buffer("pe", pe, persistent=True)
        self.drop = nn.Dropout(p=dropout)

    def forward(self, x):
        batch, length, _ = x.shape
        if length > self.pe.shape[0]:
            raise ValueError("too long")
        return self.drop(torch.add(x, self.pe[None, :length, :]))


ALTERNATIVES = {
    "sinusoidal_encoding": [
        sinusoidal_pow_stack,
        sinusoidal_python_loops,
        sinusoidal_where,
        sinusoidal_halves_interleaved,
    ],
    "PositionalEncoding": [PositionalEncodingFunctional, PositionalEncodingTorchAdd],
}
