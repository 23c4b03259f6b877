# exercise: Embedding
# mistake: forgets to multiply the looked-up vectors by sqrt(d_model)
# ruff: noqa: N806, E741, B905, E501 - a learner's style, kept as written
import torch
from torch import nn


class Embedding(nn.Module):
    def __init__(self, vocab_size: int, d_model: int):
        super().__init__()
        self.lut = nn.Embedding(vocab_size, d_model)
        self.d_model = d_model

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.lut(tokens)
