# exercise: CppEmbedding
# mistake: registers the table under the name "embedding" instead of "lut", so weights do not load by the contract's name
# ruff: noqa
CppEmbedding = compile_module(
    "Embedding",
    r"""
struct EmbeddingImpl : torch::nn::Module {
  EmbeddingImpl(int64_t vocab_size, int64_t d_model) {
    lut = register_module("embedding", torch::nn::Embedding(vocab_size, d_model));
    scale = std::sqrt(static_cast<double>(d_model));
  }

  torch::Tensor forward(torch::Tensor tokens) {
    return lut(tokens) * scale;
  }

  torch::nn::Embedding lut{nullptr};
  double scale = 1.0;
};
""",
)
