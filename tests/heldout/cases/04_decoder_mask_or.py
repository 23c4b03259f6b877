# exercise: decoder_mask
# mistake: combines the padding and the causal mask with OR instead of AND
# ruff: noqa: N806, E741, B905, E501 - a learner's style, kept as written
import torch

from solutions.masking import causal_mask, padding_mask


def decoder_mask(tokens: torch.Tensor, pad_id: int) -> torch.Tensor:
    causal = causal_mask(tokens.size(1), tokens.device)
    return padding_mask(tokens, pad_id) | causal
