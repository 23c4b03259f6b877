# exercise: PositionwiseFeedForward
# honest: keeps the activation's name and dispatches on it in forward
# ruff: noqa
class PositionwiseFeedForward(nn.Module):
    def __init__(self, d_model, d_ff, dropout=0.0, activation="relu"):
        super().__init__()
        if activation not in ("relu", "gelu"):
            raise ValueError(f"activation must be 'relu' or 'gelu', not {activation!r}")
        self.linear1 = nn.Linear(d_model, d_ff)
        self.linear2 = nn.Linear(d_ff, d_model)
        self.dropout = nn.Dropout(dropout)
        self.activation_name = activation

    def forward(self, x):
        hidden = self.linear1(x)
        hidden = F.gelu(hidden) if self.activation_name == "gelu" else torch.relu(hidden)
        return self.linear2(self.dropout(hidden))
