# exercise: PositionalEncoding
# mistake: slices the table with x.size(0) (the batch size) instead of x.size(1) (the length)
# ruff: noqa
class PositionalEncoding(nn.Module):
    def __init__(self, d_model, max_len=5000, dropout=0.0):
        super().__init__()
        self.register_buffer("pe", sinusoidal_encoding(max_len, d_model))
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        if x.size(1) > self.pe.size(0):
            raise ValueError(f"T={x.size(1)} exceeds max_len={self.pe.size(0)}")
        return self.dropout(x + self.pe[: x.size(0)].unsqueeze(1))
