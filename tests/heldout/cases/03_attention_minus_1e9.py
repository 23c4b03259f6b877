# exercise: scaled_dot_product_attention
# mistake: fills masked scores with -1e9 instead of -inf, so a query whose keys are all masked gets uniform weights instead of zeros
# ruff: noqa: N806, E741, B905, E501 - a learner's style, kept as written
import math

import torch

from solutions.validation import check_attention_inputs


def scaled_dot_product_attention(q, k, v, mask=None, dropout_p=0.0):
    check_attention_inputs(q, k, v, mask)
    scores = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(k.size(-1))
    if mask is not None:
        scores = scores.masked_fill(mask == 0, -1e9)
    p_attn = scores.softmax(dim=-1)
    if dropout_p > 0.0:
        p_attn = torch.nn.functional.dropout(p_attn, p=dropout_p)
    return torch.matmul(p_attn, v), p_attn
