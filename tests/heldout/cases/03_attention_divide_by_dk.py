# exercise: scaled_dot_product_attention
# mistake: divides the scores by d_k instead of sqrt(d_k)
# ruff: noqa: N806, E741, B905, E501 - a learner's style, kept as written
import torch

from solutions.validation import check_attention_inputs


def scaled_dot_product_attention(q, k, v, mask=None, dropout_p=0.0):
    check_attention_inputs(q, k, v, mask)
    scores = q @ k.transpose(-2, -1) / q.size(-1)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    if mask is not None:
        weights = weights.masked_fill(~mask, 0.0)
    weights = torch.nn.functional.dropout(weights, p=dropout_p, training=dropout_p > 0)
    return weights @ v, weights
