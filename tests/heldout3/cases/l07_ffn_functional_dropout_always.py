# exercise: PositionwiseFeedForward
# mistake: F.dropout(h, self.p) without training=self.training, so it drops in eval mode too
# ruff: noqa
class PositionwiseFeedForward(nn.Module):
    def __init__(self, d_model, d_ff, dropout=0.0, activation="relu"):
        super().__init__()
        if activation not in ACTIVATIONS:
            raise ValueError(f"activation must be 'relu' or 'gelu', got {activation!r}")
        self.linear1 = nn.Linear(d_model, d_ff)
        self.linear2 = nn.Linear(d_ff, d_model)
        self.p = dropout
        self.activation = ACTIVATIONS[activation]

    def forward(self, x):
        h = self.activation(self.linear1(x))
        return self.linear2(F.dropout(h, self.p))
