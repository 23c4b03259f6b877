# exercise: padding_mask
# mistake: adds only one singleton axis: [B, 1, T] instead of [B, 1, 1, T]
# ruff: noqa: N806, E741, B905, E501 - a learner's style, kept as written
import torch


def padding_mask(tokens: torch.Tensor, pad_id: int) -> torch.Tensor:
    return (tokens != pad_id).unsqueeze(1)
