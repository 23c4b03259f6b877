# exercise: sinusoidal_encoding
# mistake: the exponent uses the pair index i instead of 2i (frequencies 10000^(-i/D))
# ruff: noqa: N806, E741, B905, E501 - a learner's style, kept as written
import math

import torch


def sinusoidal_encoding(max_len: int, d_model: int) -> torch.Tensor:
    if d_model % 2 != 0:
        raise ValueError("d_model must be even")
    pe = torch.zeros(max_len, d_model)
    position = torch.arange(0, max_len, dtype=torch.float).unsqueeze(1)
    i = torch.arange(0, d_model // 2, dtype=torch.float)
    div_term = torch.exp(i * -(math.log(10000.0) / d_model))
    pe[:, 0::2] = torch.sin(position * div_term)
    pe[:, 1::2] = torch.cos(position * div_term)
    return pe
