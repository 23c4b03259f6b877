# exercise: PositionalEncoding
# mistake: the table is a plain tensor attribute, not a registered buffer (not in state_dict, does not move with .to())
# ruff: noqa
class PositionalEncoding(nn.Module):
    def __init__(self, d_model: int, max_len: int = 5000, dropout: float = 0.0):
        super().__init__()
        self.pe = sinusoidal_encoding(max_len, d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.size(1) > self.pe.size(0):
            raise ValueError(f"sequence length {x.size(1)} exceeds max_len={self.pe.size(0)}")
        return self.dropout(x + self.pe[: x.size(1)])
