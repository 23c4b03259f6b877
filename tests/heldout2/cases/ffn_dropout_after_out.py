# exercise: PositionwiseFeedForward
# mistake: applies dropout to the output of linear2 instead of to the hidden activations between the two linears
# ruff: noqa
class PositionwiseFeedForward(nn.Module):
    def __init__(self, d_model, d_ff, dropout=0.0, activation="relu"):
        super().__init__()
        if activation not in ACTIVATIONS:
            raise ValueError(f"activation must be one of relu, gelu; got {activation!r}")
        self.linear1 = nn.Linear(d_model, d_ff)
        self.linear2 = nn.Linear(d_ff, d_model)
        self.dropout = nn.Dropout(dropout)
        self.activation = ACTIVATIONS[activation]

    def forward(self, x):
        return self.dropout(self.linear2(self.activation(self.linear1(x))))
