# exercise: EncoderLayer
# mistake: post-LN written as x + norm(sublayer(x)): the residual is added after the norm instead of normalising the sum
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
            h = self.norm1(x)
            x = x + self.dropout1(self.self_attn(h, h, h, src_mask))
            x = x + self.dropout2(self.ffn(self.norm2(x)))
        else:
            x = x + self.norm1(self.dropout1(self.self_attn(x, x, x, src_mask)))
            x = x + self.norm2(self.dropout2(self.ffn(x)))
        return x
