# exercise: PositionwiseFeedForward
# mistake: dropout applied to the output of linear2 instead of between the activation and linear2
# ruff: noqa
class PositionwiseFeedForward(nn.Module):
    def __init__(self, d_model, d_ff, dropout=0.0, activation="relu"):
        super().__init__()
        if activation not in ("relu", "gelu"):
            raise ValueError(f"activation must be 'relu' or 'gelu', got {activation!r}")
        self.linear1 = nn.Linear(d_model, d_ff)
        self.linear2 = nn.Linear(d_ff, d_model)
        self.dropout = nn.Dropout(dropout)
        self.act = nn.ReLU() if activation == "relu" else nn.GELU()

    def forward(self, x):
        return self.dropout(self.linear2(self.act(self.linear1(x))))
