# exercise: split_heads
# mistake: views straight to [B, h, T, d_k] instead of viewing to [B, T, h, d_k] and transposing
# ruff: noqa: N806, E741, B905, E501 - a learner's style, kept as written
import torch


def split_heads(x: torch.Tensor, n_heads: int) -> torch.Tensor:
    B, T, D = x.shape
    return x.view(B, n_heads, T, D // n_heads)
