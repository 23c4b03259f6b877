# exercise: Generator
# mistake: takes log_softmax over dim=1 (the time axis) instead of the vocabulary axis (dim=-1)
# ruff: noqa
class Generator(nn.Module):
    def __init__(self, d_model, vocab_size):
        super().__init__()
        self.proj = nn.Linear(d_model, vocab_size)

    def forward(self, x):
        return F.log_softmax(self.proj(x), dim=1)
