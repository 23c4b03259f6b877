# exercise: PositionwiseFeedForward
# mistake: "gelu" uses the tanh approximation (approximate="tanh") instead of the exact erf GELU
# ruff: noqa
class PositionwiseFeedForward(nn.Module):
    def __init__(self, d_model, d_ff, dropout=0.0, activation="relu"):
        super().__init__()
        if activation == "relu":
            self.activation = nn.ReLU()
        elif activation == "gelu":
            self.activation = nn.GELU(approximate="tanh")
        else:
            raise ValueError(f"unknown activation {activation!r}: use 'relu' or 'gelu'")
        self.linear1 = nn.Linear(d_model, d_ff)
        self.linear2 = nn.Linear(d_ff, d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        return self.linear2(self.dropout(self.activation(self.linear1(x))))
