# exercise: scaled_dot_product_attention
# mistake: fills masked scores with -1e9 and never zeroes them, so a query with no key to attend to gets uniform weights (the mean of the values) instead of zeros
# ruff: noqa
def scaled_dot_product_attention(q, k, v, mask=None, dropout_p=0.0):
    check_attention_inputs(q, k, v, mask)
    d_k = q.size(-1)
    scores = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(d_k)
    if mask is not None:
        scores = scores.masked_fill(mask == 0, -1e9)
    weights = F.softmax(scores, dim=-1)
    if dropout_p > 0:
        weights = F.dropout(weights, p=dropout_p)
    return torch.matmul(weights, v), weights
