# exercise: EncoderLayer
# mistake: Pre-LN adds the residual to the normalised input (x = norm1(x) + attn(...)) instead of to x
# ruff: noqa
class EncoderLayer(nn.Module):
    def __init__(self, d_model, n_heads, d_ff, dropout=0.0, norm_first=False):
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, n_heads, dropout)
        self.ffn = PositionwiseFeedForward(d_model, d_ff, dropout)
        self.norm1 = LayerNorm(d_model)
        self.norm2 = LayerNorm(d_model)
        self.drop = nn.Dropout(dropout)
        self.norm_first = norm_first

    def forward(self, x, src_mask=None):
        if self.norm_first:
            x = self.norm1(x)
            x = x + self.drop(self.self_attn(x, x, x, src_mask))
            x = self.norm2(x)
            x = x + self.drop(self.ffn(x))
            return x
        x = self.norm1(x + self.drop(self.self_attn(x, x, x, src_mask)))
        return self.norm2(x + self.drop(self.ffn(x)))
