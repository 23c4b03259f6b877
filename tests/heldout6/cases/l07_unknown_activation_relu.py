# exercise: PositionwiseFeedForward
# mistake: any activation other than "gelu" silently falls back to ReLU instead of raising a ValueError
# ruff: noqa
class PositionwiseFeedForward(nn.Module):
    def __init__(self, d_model, d_ff, dropout=0.0, activation="relu"):
        super().__init__()
        self.linear1 = nn.Linear(d_model, d_ff)
        self.linear2 = nn.Linear(d_ff, d_model)
        self.dropout = nn.Dropout(dropout)
        self.activation = F.gelu if activation == "gelu" else F.relu

    def forward(self, x):
        return self.linear2(self.dropout(self.activation(self.linear1(x))))
