# exercise: causal_mask
# mistake: tril with diagonal=-1, so a query may not attend to its own position
# ruff: noqa: N806, E741, B905, E501 - a learner's style, kept as written
import torch


def causal_mask(size: int, device=None) -> torch.Tensor:
    return torch.ones(size, size, device=device).tril(diagonal=-1).bool()
