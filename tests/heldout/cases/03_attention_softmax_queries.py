# exercise: scaled_dot_product_attention
# mistake: softmax over the queries (dim=-2) instead of over the keys
# ruff: noqa: N806, E741, B905, E501 - a learner's style, kept as written
import math

import torch

from solutions.validation import check_attention_inputs


def scaled_dot_product_attention(q, k, v, mask=None, dropout_p=0.0):
    check_attention_inputs(q, k, v, mask)
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-2)
    weights = torch.nan_to_num(weights, nan=0.0)
    weights = torch.nn.functional.dropout(weights, dropout_p)
    return weights @ v, weights
