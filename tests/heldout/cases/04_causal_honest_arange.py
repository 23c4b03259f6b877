# exercise: causal_mask
# honest: compares key and query indices built with arange
# ruff: noqa: N806, E741, B905, E501 - a learner's style, kept as written
import torch


def causal_mask(size: int, device=None) -> torch.Tensor:
    index = torch.arange(size, device=device)
    return index[None, :] <= index[:, None]
