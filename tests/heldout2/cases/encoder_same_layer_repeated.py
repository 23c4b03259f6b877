# exercise: Encoder
# mistake: builds the stack as [EncoderLayer(...)] * n_layers, so every layer is the same module with shared weights
# ruff: noqa
class Encoder(nn.Module):
    def __init__(self, d_model, n_heads, d_ff, n_layers, dropout=0.0, norm_first=False):
        super().__init__()
        self.layers = nn.ModuleList([EncoderLayer(d_model, n_heads, d_ff, dropout, norm_first)] * n_layers)
        self.norm = LayerNorm(d_model)

    def forward(self, x, src_mask=None):
        for layer in self.layers:
            x = layer(x, src_mask)
        return self.norm(x)
