"""Lesson 01: token embedding, scaled by sqrt(d_model)."""

import math

import torch
from torch import nn

from solutions.validation import check_token_ids


class Embedding(nn.Module):
    """Look up a learned vector for each token id and scale it by sqrt(d_model).

    tokens: Long[B, T] with ids in [0, vocab_size)  ->  [B, T, D]
    The scale keeps the embeddings on the same footing as the positional
    encoding, whose entries lie in [-1, 1].
    """

    def __init__(self, vocab_size: int, d_model: int):
        super().__init__()
        ### BEGIN SOLUTION
        self.lut = nn.Embedding(vocab_size, d_model)
        self.d_model = d_model
        ### END SOLUTION

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        check_token_ids(tokens, self.lut.num_embeddings)
        ### BEGIN SOLUTION
        return self.lut(tokens) * math.sqrt(self.d_model)  # [B, T, D]
        ### END SOLUTION
