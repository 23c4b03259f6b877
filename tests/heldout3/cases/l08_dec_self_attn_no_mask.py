# exercise: DecoderLayer
# mistake: the decoder's self-attention is called without tgt_mask, so positions see the future
# ruff: noqa
class DecoderLayer(nn.Module):
    def __init__(self, d_model, n_heads, d_ff, dropout=0.0, norm_first=False):
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, n_heads, dropout)
        self.cross_attn = MultiHeadAttention(d_model, n_heads, dropout)
        self.ffn = PositionwiseFeedForward(d_model, d_ff, dropout)
        self.norm1 = LayerNorm(d_model)
        self.norm2 = LayerNorm(d_model)
        self.norm3 = LayerNorm(d_model)
        self.dropout1 = nn.Dropout(dropout)
        self.dropout2 = nn.Dropout(dropout)
        self.dropout3 = nn.Dropout(dropout)
        self.norm_first = norm_first

    def forward(self, x, memory, src_mask=None, tgt_mask=None):
        if self.norm_first:
            h = self.norm1(x)
            x = x + self.dropout1(self.self_attn(h, h, h))
            h = self.norm2(x)
            x = x + self.dropout2(self.cross_attn(h, memory, memory, src_mask))
            return x + self.dropout3(self.ffn(self.norm3(x)))
        x = self.norm1(x + self.dropout1(self.self_attn(x, x, x)))
        x = self.norm2(x + self.dropout2(self.cross_attn(x, memory, memory, src_mask)))
        return self.norm3(x + self.dropout3(self.ffn(x)))
