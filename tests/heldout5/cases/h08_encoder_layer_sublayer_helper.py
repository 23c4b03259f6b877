# exercise: EncoderLayer
# honest: one residual helper method taking the sub-layer as a function and its norm, for both Post-LN and Pre-LN
# ruff: noqa
class EncoderLayer(nn.Module):
    def __init__(self, d_model, n_heads, d_ff, dropout=0.0, norm_first=False):
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, n_heads, dropout=dropout)
        self.ffn = PositionwiseFeedForward(d_model, d_ff, dropout=dropout)
        self.norm1 = LayerNorm(d_model)
        self.norm2 = LayerNorm(d_model)
        self.drop = nn.Dropout(dropout)
        self.norm_first = norm_first

    def _residual(self, x, norm, fn):
        if self.norm_first:
            return x + self.drop(fn(norm(x)))
        return norm(x + self.drop(fn(x)))

    def forward(self, x, src_mask=None):
        x = self._residual(x, self.norm1, lambda y: self.self_attn(y, y, y, src_mask))
        return self._residual(x, self.norm2, self.ffn)
