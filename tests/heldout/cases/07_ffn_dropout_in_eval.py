# exercise: PositionwiseFeedForward
# mistake: F.dropout without training=self.training, so it still drops in eval mode
# ruff: noqa: N806, E741, B905, E501 - a learner's style, kept as written
import torch
import torch.nn.functional as F
from torch import nn


class PositionwiseFeedForward(nn.Module):
    def __init__(self, d_model: int, d_ff: int, dropout: float = 0.0, activation: str = "relu"):
        super().__init__()
        if activation not in ("relu", "gelu"):
            raise ValueError(f"activation must be 'relu' or 'gelu', got {activation!r}")
        self.linear1 = nn.Linear(d_model, d_ff)
        self.linear2 = nn.Linear(d_ff, d_model)
        self.p = dropout
        self.act = F.relu if activation == "relu" else F.gelu

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear2(F.dropout(self.act(self.linear1(x)), self.p))
