# exercise: Encoder
# mistake: nn.ModuleList([layer] * n_layers): the same layer object (one set of weights) repeated n times
# ruff: noqa
class Encoder(nn.Module):
    def __init__(self, d_model, n_heads, d_ff, n_layers, dropout=0.0, norm_first=False):
        super().__init__()
        layer = EncoderLayer(d_model, n_heads, d_ff, dropout, norm_first)
        self.layers = nn.ModuleList([layer] * n_layers)
        self.norm = LayerNorm(d_model)

    def forward(self, x, src_mask=None):
        for layer in self.layers:
            x = layer(x, src_mask)
        return self.norm(x)
