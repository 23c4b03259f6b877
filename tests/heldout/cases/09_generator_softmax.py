# exercise: Generator
# mistake: returns softmax probabilities instead of log-probabilities
# ruff: noqa: N806, E741, B905, E501 - a learner's style, kept as written
import torch
from torch import nn


class Generator(nn.Module):
    def __init__(self, d_model: int, vocab_size: int):
        super().__init__()
        self.proj = nn.Linear(d_model, vocab_size)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(self.proj(x), dim=-1)
