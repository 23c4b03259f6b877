# exercise: scaled_dot_product_attention
# mistake: fills the scores where the mask is True (inverted mask sense: True taken as "blocked")
# ruff: noqa: N806, E741, B905, E501 - a learner's style, kept as written
import math

import torch

from solutions.validation import check_attention_inputs


def scaled_dot_product_attention(q, k, v, mask=None, dropout_p=0.0):
    check_attention_inputs(q, k, v, mask)
    d_k = q.shape[-1]
    scores = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(d_k)
    if mask is not None:
        scores = scores.masked_fill(mask, float("-inf"))
    weights = scores.softmax(-1)
    if mask is not None:
        weights = weights.masked_fill(mask, 0.0)
    if dropout_p > 0:
        weights = torch.dropout(weights, dropout_p, True)
    return weights @ v, weights
