# exercise: scaled_dot_product_attention
# mistake: divides the scores by sqrt of the values' width d_v instead of d_k
# ruff: noqa
def scaled_dot_product_attention(q, k, v, mask=None, dropout_p=0.0):
    check_attention_inputs(q, k, v, mask)
    scores = q @ k.transpose(-2, -1) / math.sqrt(v.size(-1))
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    if mask is not None:
        weights = weights.masked_fill(~mask, 0.0)
    if dropout_p > 0:
        weights = F.dropout(weights, dropout_p)
    return weights @ v, weights
