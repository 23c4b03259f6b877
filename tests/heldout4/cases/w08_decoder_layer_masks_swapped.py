# exercise: DecoderLayer
# mistake: passes the source mask to the self-attention and the target (causal) mask to the cross-attention
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
        self.drop = nn.Dropout(dropout)
        self.norm_first = norm_first

    def forward(self, x, memory, src_mask=None, tgt_mask=None):
        if self.norm_first:
            h = self.norm1(x)
            x = x + self.drop(self.self_attn(h, h, h, src_mask))
            h = self.norm2(x)
            x = x + self.drop(self.cross_attn(h, memory, memory, tgt_mask))
            x = x + self.drop(self.ffn(self.norm3(x)))
        else:
            x = self.norm1(x + self.drop(self.self_attn(x, x, x, src_mask)))
            x = self.norm2(x + self.drop(self.cross_attn(x, memory, memory, tgt_mask)))
            x = self.norm3(x + self.drop(self.ffn(x)))
        return x
