# exercise: CppEmbedding
# honest: EmbeddingOptions, lut->forward, the scale read from the options in forward with mul
# ruff: noqa
CppEmbedding = compile_module(
    "Embedding",
    r"""
struct EmbeddingImpl : torch::nn::Module {
  // tokens: Long[B, T] -> [B, T, D]: the rows of the table lut, times sqrt(d_model)
  EmbeddingImpl(int64_t vocab_size, int64_t d_model) {
    lut = register_module("lut", torch::nn::Embedding(torch::nn::EmbeddingOptions(vocab_size, d_model)));
  }

  torch::Tensor forward(torch::Tensor tokens) {
    const double d = static_cast<double>(lut->options.embedding_dim());
    return lut->forward(tokens).mul(std::sqrt(d));
  }

  torch::nn::Embedding lut{nullptr};  // registered as "lut", so weights load by that name
  double scale = 1.0;
};
""",
)
