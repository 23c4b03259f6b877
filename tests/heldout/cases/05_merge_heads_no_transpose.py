# exercise: merge_heads
# mistake: reshapes [B, h, T, d_k] straight to [B, T, D] without moving the heads back next to d_k
# ruff: noqa: N806, E741, B905, E501 - a learner's style, kept as written
import torch


def merge_heads(x: torch.Tensor) -> torch.Tensor:
    B, h, T, d_k = x.shape
    return x.reshape(B, T, h * d_k)
