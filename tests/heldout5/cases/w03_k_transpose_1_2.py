# exercise: scaled_dot_product_attention
# mistake: transposes k with transpose(1, 2), right only for 3-d inputs; with heads [B, h, T, d_k] it swaps h and T
# ruff: noqa
def scaled_dot_product_attention(q, k, v, mask=None, dropout_p=0.0):
    check_attention_inputs(q, k, v, mask)
    d_k = q.size(-1)
    scores = torch.matmul(q, k.transpose(1, 2)) / math.sqrt(d_k)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    if mask is not None:
        weights = weights.masked_fill(~mask, 0.0)
    if dropout_p > 0:
        weights = F.dropout(weights, dropout_p)
    return torch.matmul(weights, v), weights
