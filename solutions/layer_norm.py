"""Lesson 06: layer normalization."""

import torch
from torch import nn


class LayerNorm(nn.Module):
    """Normalize each position's D features to mean 0 and variance 1, then scale and shift.

    x: [..., D] -> gamma * (x - mean) / sqrt(var + eps) + beta: [..., D]
    The variance is the biased one (divide by D, not D - 1) and eps sits
    inside the square root, as in torch.nn.LayerNorm.
    """

    def __init__(self, d_model: int, eps: float = 1e-5):
        super().__init__()
        ### BEGIN SOLUTION
        self.gamma = nn.Parameter(torch.ones(d_model))
        self.beta = nn.Parameter(torch.zeros(d_model))
        self.eps = eps
        ### END SOLUTION

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        ### BEGIN SOLUTION
        mean = x.mean(dim=-1, keepdim=True)  # [..., 1]
        var = ((x - mean) ** 2).mean(dim=-1, keepdim=True)  # biased: divide by D
        return self.gamma * (x - mean) / torch.sqrt(var + self.eps) + self.beta
        ### END SOLUTION
