# exercise: PositionwiseFeedForward
# honest: looks the activation up in a dict of functions, dropout through F.dropout with training=self.training
# ruff: noqa: N806, E741, B905, E501 - a learner's style, kept as written
import torch
import torch.nn.functional as F
from torch import nn


class PositionwiseFeedForward(nn.Module):
    def __init__(self, d_model: int, d_ff: int, dropout: float = 0.0, activation: str = "relu"):
        super().__init__()
        table = {"relu": torch.relu, "gelu": F.gelu}
        if activation not in table:
            raise ValueError(f"activation should be 'relu' or 'gelu', not {activation!r}")
        self.linear1 = nn.Linear(d_model, d_ff)
        self.linear2 = nn.Linear(d_ff, d_model)
        self.fn = table[activation]
        self.p = dropout

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        hidden = self.fn(self.linear1(x))
        return self.linear2(F.dropout(hidden, self.p, training=self.training))
