# exercise: EncoderLayer
# mistake: in Pre-LN the residual adds the sub-layer to the normalised input h = norm(x) instead of to x
# ruff: noqa
class EncoderLayer(nn.Module):
    def __init__(self, d_model, n_heads, d_ff, dropout=0.0, norm_first=False):
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, n_heads, dropout)
        self.ffn = PositionwiseFeedForward(d_model, d_ff, dropout)
        self.norm1 = LayerNorm(d_model)
        self.norm2 = LayerNorm(d_model)
        self.dropout1 = nn.Dropout(dropout)
        self.dropout2 = nn.Dropout(dropout)
        self.norm_first = norm_first

    def forward(self, x, src_mask=None):
        if self.norm_first:
            x = self.norm1(x)
            x = x + self.dropout1(self.self_attn(x, x, x, src_mask))
            x = self.norm2(x)
            x = x + self.dropout2(self.ffn(x))
        else:
            x = self.norm1(x + self.dropout1(self.self_attn(x, x, x, src_mask)))
            x = self.norm2(x + self.dropout2(self.ffn(x)))
        return x
