# exercise: scaled_dot_product_attention
# honest: einsum for both products; masked with torch.where, fully masked rows' NaN turned to 0 with nan_to_num
# ruff: noqa
def scaled_dot_product_attention(q, k, v, mask=None, dropout_p=0.0):
    check_attention_inputs(q, k, v, mask)
    scores = torch.einsum("...qd,...kd->...qk", q, k) * q.size(-1) ** -0.5
    if mask is not None:
        scores = torch.where(
            mask, scores, torch.tensor(float("-inf"), dtype=scores.dtype, device=scores.device)
        )
    weights = torch.nan_to_num(scores.softmax(dim=-1), nan=0.0)
    if dropout_p > 0.0:
        weights = F.dropout(weights, p=dropout_p)
    return torch.einsum("...qk,...kd->...qd", weights, v), weights
