# exercise: Embedding
# mistake: scales by sqrt(vocab_size) instead of sqrt(d_model)
# ruff: noqa
class Embedding(nn.Module):
    def __init__(self, vocab_size: int, d_model: int):
        super().__init__()
        self.lut = nn.Embedding(vocab_size, d_model)
        self.scale = math.sqrt(vocab_size)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        check_token_ids(tokens, self.lut.num_embeddings)
        return self.lut(tokens) * self.scale
