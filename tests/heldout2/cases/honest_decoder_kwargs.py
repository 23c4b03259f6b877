# exercise: Decoder
# honest: calls each layer with keyword arguments and builds the list with append
# ruff: noqa
class Decoder(nn.Module):
    def __init__(self, d_model, n_heads, d_ff, n_layers, dropout=0.0, norm_first=False):
        super().__init__()
        self.layers = nn.ModuleList()
        for _ in range(n_layers):
            self.layers.append(DecoderLayer(d_model, n_heads, d_ff, dropout=dropout, norm_first=norm_first))
        self.norm = LayerNorm(d_model)

    def forward(self, x, memory, src_mask=None, tgt_mask=None):
        for layer in self.layers:
            x = layer(x, memory, src_mask=src_mask, tgt_mask=tgt_mask)
        return self.norm(x)
