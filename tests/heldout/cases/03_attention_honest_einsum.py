# exercise: scaled_dot_product_attention
# honest: einsum for both products, torch.where on the mask, nan_to_num for fully masked rows
# ruff: noqa: N806, E741, B905, E501 - a learner's style, kept as written
import math

import torch

from solutions.validation import check_attention_inputs


def scaled_dot_product_attention(q, k, v, mask=None, dropout_p=0.0):
    check_attention_inputs(q, k, v, mask)
    scores = torch.einsum("...qd,...kd->...qk", q, k) * (1.0 / math.sqrt(q.shape[-1]))
    if mask is not None:
        scores = torch.where(mask, scores, torch.tensor(float("-inf"), dtype=scores.dtype))
    weights = torch.nan_to_num(torch.softmax(scores, dim=-1), nan=0.0)
    if dropout_p:
        weights = torch.nn.functional.dropout(weights, dropout_p)
    return torch.einsum("...qk,...kd->...qd", weights, v), weights
