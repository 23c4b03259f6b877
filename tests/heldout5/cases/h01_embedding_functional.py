# exercise: Embedding
# honest: F.embedding on the lut's weight, scale as d_model ** 0.5 read from the table's width
# ruff: noqa
class Embedding(nn.Module):
    def __init__(self, vocab_size: int, d_model: int):
        super().__init__()
        self.lut = nn.Embedding(vocab_size, d_model)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        check_token_ids(tokens, self.lut.num_embeddings)
        return F.embedding(tokens, self.lut.weight) * self.lut.embedding_dim**0.5
