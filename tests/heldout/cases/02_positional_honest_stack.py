# exercise: PositionalEncoding
# honest: builds the table by stacking sin and cos and flattening, checks the length before slicing, nn.Dropout module
# ruff: noqa: N806, E741, B905, E501 - a learner's style, kept as written

import torch
from torch import nn


class PositionalEncoding(nn.Module):
    def __init__(self, d_model: int, max_len: int = 5000, dropout: float = 0.0):
        super().__init__()
        if d_model % 2:
            raise ValueError(f"d_model must be even, got {d_model}")
        angles = torch.arange(max_len, dtype=torch.float64)[:, None] * torch.pow(
            10000.0, -torch.arange(0, d_model, 2, dtype=torch.float64) / d_model
        )
        table = torch.stack([angles.sin(), angles.cos()], dim=-1).reshape(max_len, d_model)
        self.register_buffer("pe", table.float())
        self.drop = nn.Dropout(dropout)
        self.max_len = max_len

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        length = x.shape[1]
        if length > self.max_len:
            raise ValueError(f"sequence of length {length} is longer than max_len={self.max_len}")
        return self.drop(x + self.pe[:length].to(x.dtype))
