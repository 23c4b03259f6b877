# exercise: scaled_dot_product_attention
# mistake: mask convention inverted (fills where the mask is True, as nn.MultiheadAttention's boolean masks)
# ruff: noqa
def scaled_dot_product_attention(q, k, v, mask=None, dropout_p=0.0):
    check_attention_inputs(q, k, v, mask)
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
    if mask is not None:
        scores = scores.masked_fill(mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    if mask is not None:
        weights = weights.masked_fill(mask, 0.0)
    weights = F.dropout(weights, dropout_p) if dropout_p > 0 else weights
    return weights @ v, weights
