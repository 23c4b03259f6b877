"""Alternative correct feed-forward networks: activation modules, hand-written ReLU/GELU, einsum."""

import math

import torch
from torch import nn


class FeedForwardModules(nn.Module):
    """The activation as a module (nn.ReLU / nn.GELU) chosen from a dict of classes."""

    CHOICES = {"relu": nn.ReLU, "gelu": nn.GELU}

    def __init__(self, d_model, d_ff, dropout=0.0, activation="relu"):
        super().__init__()
        if activation not in self.CHOICES:
            raise ValueError(f"unknown activation {activation!r}; use 'relu' or 'gelu'")
        self.linear1 = nn.Linear(d_model, d_ff)
        self.linear2 = nn.Linear(d_ff, d_model)
        self.act = self.CHOICES[activation]()
        self.drop = nn.Dropout(dropout)

    def forward(self, x):
        return self.linear2(self.drop(self.act(self.linear1(x))))


class FeedForwardByHand(nn.Module):
    """ReLU as clamp(min=0) and the exact GELU written out with erf; the name kept as a string."""

    def __init__(self, d_model, d_ff, dropout=0.0, activation="relu"):
        super().__init__()
        match activation:
            case "relu" | "gelu":
                self.kind = activation
            case _:
                raise ValueError(f"activation must be 'relu' or 'gelu', not {activation!r}")
        self.linear1 = nn.Linear(d_model, d_ff)
        self.linear2 = nn.Linear(d_ff, d_model)
        self.p = dropout

    def forward(self, x):
        hidden = self.linear1(x)
        if self.kind == "relu":
            hidden = hidden.clamp(min=0)
        else:
            hidden = 0.5 * hidden * (1.0 + torch.erf(hidden / math.sqrt(2.0)))
        hidden = nn.functional.dropout(hidden, self.p, self.training)
        return self.linear2(hidden)


class FeedForwardEinsum(nn.Module):
    """Both linear maps as einsum over the nn.Linear weights; torch.relu / gelu(approximate='none')."""

    def __init__(self, d_model, d_ff, dropout=0.0, activation="relu"):
        super().__init__()
        functions = {"relu": torch.relu, "gelu": lambda h: nn.functional.gelu(h, approximate="none")}
        if activation not in functions:
            raise ValueError(f"activation {activation!r} is not one of {sorted(functions)}")
        self.function = functions[activation]
        self.linear1 = nn.Linear(d_model, d_ff)
        self.linear2 = nn.Linear(d_ff, d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        hidden = torch.einsum("...d,fd->...f", x, self.linear1.weight) + self.linear1.bias
        hidden = self.dropout(self.function(hidden))
        return torch.einsum("...f,df->...d", hidden, self.linear2.weight) + self.linear2.bias


ALTERNATIVES = {"PositionwiseFeedForward": [FeedForwardModules, FeedForwardByHand, FeedForwardEinsum]}
