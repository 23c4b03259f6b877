# exercise: LayerNorm
# honest: centres first, then the mean of squares and rsqrt
# ruff: noqa: N806, E741, B905, E501 - a learner's style, kept as written
import torch
from torch import nn


class LayerNorm(nn.Module):
    def __init__(self, d_model: int, eps: float = 1e-5):
        super().__init__()
        self.eps = eps
        self.gamma = nn.Parameter(torch.ones(d_model))
        self.beta = nn.Parameter(torch.zeros(d_model))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        centred = x - x.mean(dim=-1, keepdim=True)
        inv_std = torch.rsqrt(centred.pow(2).mean(dim=-1, keepdim=True) + self.eps)
        return centred * inv_std * self.gamma + self.beta
