# exercise: PositionwiseFeedForward
# mistake: uses the tanh approximation of GELU instead of the exact erf-based one
# ruff: noqa: N806, E741, B905, E501 - a learner's style, kept as written
import torch
from torch import nn


class PositionwiseFeedForward(nn.Module):
    def __init__(self, d_model: int, d_ff: int, dropout: float = 0.0, activation: str = "relu"):
        super().__init__()
        self.linear1 = nn.Linear(d_model, d_ff)
        self.linear2 = nn.Linear(d_ff, d_model)
        self.dropout = nn.Dropout(dropout)
        if activation == "relu":
            self.activation = nn.ReLU()
        elif activation == "gelu":
            self.activation = nn.GELU(approximate="tanh")
        else:
            raise ValueError(f"unknown activation {activation!r}: expected 'relu' or 'gelu'")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear2(self.dropout(self.activation(self.linear1(x))))
