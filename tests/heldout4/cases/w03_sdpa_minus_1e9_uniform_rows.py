# exercise: scaled_dot_product_attention
# mistake: masks with -1e9 and never zeroes a fully masked row, so such a row attends uniformly to every key
# ruff: noqa
def scaled_dot_product_attention(q, k, v, mask=None, dropout_p=0.0):
    check_attention_inputs(q, k, v, mask)
    d_k = q.size(-1)
    scores = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(d_k)
    if mask is not None:
        scores = scores.masked_fill(mask == 0, -1e9)
    p_attn = scores.softmax(dim=-1)
    if dropout_p > 0:
        p_attn = F.dropout(p_attn, dropout_p)
    return torch.matmul(p_attn, v), p_attn
