"""Lesson 07: the position-wise feed-forward network."""

import torch
import torch.nn.functional as F
from torch import nn

ACTIVATIONS = {"relu": F.relu, "gelu": F.gelu}


class PositionwiseFeedForward(nn.Module):
    """Two linear maps with a non-linearity between, applied to each position alone.

    x: [B, T, D] -> linear2(dropout(activation(linear1(x)))): [B, T, D],
    through a hidden width d_ff (4 * D in the paper). ``activation`` is
    "relu" (the paper) or "gelu" (exact, erf-based, as in torch).
    """

    def __init__(self, d_model: int, d_ff: int, dropout: float = 0.0, activation: str = "relu"):
        super().__init__()
        ### BEGIN SOLUTION
        if activation not in ACTIVATIONS:
            raise ValueError(f"activation must be one of {sorted(ACTIVATIONS)}, got {activation!r}")
        self.linear1 = nn.Linear(d_model, d_ff)
        self.linear2 = nn.Linear(d_ff, d_model)
        self.dropout = nn.Dropout(dropout)
        self.activation = ACTIVATIONS[activation]
        ### END SOLUTION

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        ### BEGIN SOLUTION
        return self.linear2(self.dropout(self.activation(self.linear1(x))))  # [B, T, D]
        ### END SOLUTION
