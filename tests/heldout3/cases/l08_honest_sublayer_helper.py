# exercise: EncoderLayer
# honest: one residual helper taking the sub-layer as a lambda, used for both sub-layers and both norm placements
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

    def _residual(self, x, sublayer, norm, drop):
        if self.norm_first:
            return x + drop(sublayer(norm(x)))
        return norm(x + drop(sublayer(x)))

    def forward(self, x, src_mask=None):
        x = self._residual(x, lambda y: self.self_attn(y, y, y, src_mask), self.norm1, self.dropout1)
        return self._residual(x, self.ffn, self.norm2, self.dropout2)
