# exercise: Embedding
# mistake: multiplies the looked-up vectors by d_model instead of sqrt(d_model)
# ruff: noqa
class Embedding(nn.Module):
    def __init__(self, vocab_size, d_model):
        super().__init__()
        self.lut = nn.Embedding(vocab_size, d_model)
        self.d_model = d_model

    def forward(self, tokens):
        check_token_ids(tokens, self.lut.num_embeddings)
        return self.lut(tokens) * self.d_model
