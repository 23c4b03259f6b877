# exercise: Decoder
# mistake: [DecoderLayer(...)] * n_layers repeats one layer object, so every layer shares the same weights
# ruff: noqa
class Decoder(nn.Module):
    def __init__(self, d_model, n_heads, d_ff, n_layers, dropout=0.0, norm_first=False):
        super().__init__()
        self.layers = nn.ModuleList([DecoderLayer(d_model, n_heads, d_ff, dropout, norm_first)] * n_layers)
        self.norm = LayerNorm(d_model)

    def forward(self, x, memory, src_mask=None, tgt_mask=None):
        for layer in self.layers:
            x = layer(x, memory, src_mask, tgt_mask)
        return self.norm(x)
