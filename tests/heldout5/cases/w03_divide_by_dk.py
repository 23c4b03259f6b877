# exercise: scaled_dot_product_attention
# mistake: divides the scores by d_k instead of sqrt(d_k)
# ruff: noqa
def scaled_dot_product_attention(q, k, v, mask=None, dropout_p=0.0):
    check_attention_inputs(q, k, v, mask)
    scores = torch.matmul(q, k.transpose(-2, -1)) / q.size(-1)
    if mask is not None:
        scores = scores.masked_fill(mask == 0, float("-inf"))
    weights = scores.softmax(dim=-1)
    if mask is not None:
        weights = weights.masked_fill(mask == 0, 0.0)
    if dropout_p > 0:
        weights = F.dropout(weights, dropout_p)
    return torch.matmul(weights, v), weights
