# exercise: sinusoidal_encoding
# mistake: puts all the sines in the first half of the columns and the cosines in the second half instead of interleaving them
# ruff: noqa: N806, E741, B905, E501 - a learner's style, kept as written
import math

import torch


def sinusoidal_encoding(max_len: int, d_model: int) -> torch.Tensor:
    if d_model % 2:
        raise ValueError(f"d_model must be even, got {d_model}")
    pos = torch.arange(max_len).unsqueeze(1).float()
    freq = torch.exp(torch.arange(0, d_model, 2).float() * (-math.log(10000.0) / d_model))
    return torch.cat([torch.sin(pos * freq), torch.cos(pos * freq)], dim=1)
