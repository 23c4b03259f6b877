# exercise: Encoder
# mistake: applies the final norm only when norm_first is True (skips it for Post-LN), though the contract always applies it
# ruff: noqa
class Encoder(nn.Module):
    def __init__(self, d_model, n_heads, d_ff, n_layers, dropout=0.0, norm_first=False):
        super().__init__()
        self.layers = nn.ModuleList(
            [EncoderLayer(d_model, n_heads, d_ff, dropout, norm_first) for _ in range(n_layers)]
        )
        self.norm = LayerNorm(d_model)
        self.norm_first = norm_first

    def forward(self, x, src_mask=None):
        for layer in self.layers:
            x = layer(x, src_mask)
        return self.norm(x) if self.norm_first else x
