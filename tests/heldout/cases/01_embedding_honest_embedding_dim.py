# exercise: Embedding
# honest: reads d_model back from lut.embedding_dim and scales with ** 0.5
# ruff: noqa: N806, E741, B905, E501 - a learner's style, kept as written
import torch
from torch import nn

from solutions.validation import check_token_ids


class Embedding(nn.Module):
    def __init__(self, vocab_size: int, d_model: int):
        super().__init__()
        self.lut = nn.Embedding(vocab_size, d_model)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        check_token_ids(tokens, self.lut.num_embeddings)
        return self.lut(tokens) * self.lut.embedding_dim**0.5
