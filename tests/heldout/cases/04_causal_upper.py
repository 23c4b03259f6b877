# exercise: causal_mask
# mistake: keeps the upper triangle (triu) instead of the lower one: each query sees its future
# ruff: noqa: N806, E741, B905, E501 - a learner's style, kept as written
import torch


def causal_mask(size: int, device=None) -> torch.Tensor:
    return torch.triu(torch.ones(size, size, dtype=torch.bool, device=device))
