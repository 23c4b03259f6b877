"""Alternative correct implementations of lesson 01's Embedding."""

import math

import torch
from torch import nn


class EmbeddingOneHot(nn.Module):
    """The lookup written as a one-hot matrix product with the table, scaled by d_model ** 0.5."""

    def __init__(self, vocab_size, d_model):
        super().__init__()
        self.lut = nn.Embedding(vocab_size, d_model)
        self.scale = d_model**0.5

    def forward(self, tokens):
        one_hot = torch.nn.functional.one_hot(tokens, self.lut.num_embeddings).to(self.lut.weight.dtype)
        return self.scale * (one_hot @ self.lut.weight)


class EmbeddingIndexing(nn.Module):
    """Indexing the weight table directly; the scale read from the table's width."""

    def __init__(self, vocab_size, d_model):
        super().__init__()
        self.lut = nn.Embedding(vocab_size, d_model)

    def forward(self, tokens):
        return self.lut.weight[tokens] * math.sqrt(self.lut.weight.size(1))


class EmbeddingFunctional(nn.Module):
    """F.embedding on the table, multiplied by a tensor scale made on the weights' device."""

    def __init__(self, vocab_size, d_model):
        super().__init__()
        self.d_model = d_model
        self.lut = nn.Embedding(vocab_size, d_model)

    def forward(self, tokens):
        scale = torch.tensor(float(self.d_model), dtype=self.lut.weight.dtype, device=tokens.device).sqrt()
        return torch.nn.functional.embedding(tokens, self.lut.weight) * scale


ALTERNATIVES = {"Embedding": [EmbeddingOneHot, EmbeddingIndexing, EmbeddingFunctional]}
