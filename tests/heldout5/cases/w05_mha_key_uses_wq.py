# exercise: MultiHeadAttention
# mistake: copy-paste slip: the keys are projected with w_q instead of w_k
# ruff: noqa
class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, n_heads, dropout=0.0):
        super().__init__()
        if d_model % n_heads != 0:
            raise ValueError(f"d_model ({d_model}) must be divisible by n_heads ({n_heads})")
        self.h = n_heads
        self.w_q = nn.Linear(d_model, d_model)
        self.w_k = nn.Linear(d_model, d_model)
        self.w_v = nn.Linear(d_model, d_model)
        self.w_o = nn.Linear(d_model, d_model)
        self.dropout = dropout
        self.attn = None

    def forward(self, query, key, value, mask=None):
        q = split_heads(self.w_q(query), self.h)
        k = split_heads(self.w_q(key), self.h)
        v = split_heads(self.w_v(value), self.h)
        out, self.attn = scaled_dot_product_attention(q, k, v, mask, self.dropout if self.training else 0.0)
        return self.w_o(merge_heads(out))
