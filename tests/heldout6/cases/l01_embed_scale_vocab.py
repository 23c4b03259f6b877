# exercise: Embedding
# mistake: scales by sqrt(vocab_size) instead of sqrt(d_model)
# ruff: noqa
class Embedding(nn.Module):
    def __init__(self, vocab_size, d_model):
        super().__init__()
        self.lut = nn.Embedding(vocab_size, d_model)
        self.vocab_size = vocab_size

    def forward(self, tokens):
        check_token_ids(tokens, self.lut.num_embeddings)
        return self.lut(tokens) * math.sqrt(self.vocab_size)
