# exercise: PositionalEncoding
# mistake: adds the table in place (x += pe[:T]), changing the caller's tensor
# ruff: noqa
class PositionalEncoding(nn.Module):
    def __init__(self, d_model, max_len=5000, dropout=0.0):
        super().__init__()
        self.register_buffer("pe", sinusoidal_encoding(max_len, d_model))
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        T = x.size(1)
        if T > self.pe.size(0):
            raise ValueError(f"sequence length {T} exceeds max_len={self.pe.size(0)}")
        x += self.pe[:T]
        return self.dropout(x)
