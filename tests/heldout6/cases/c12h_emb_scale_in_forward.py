# exercise: CppEmbedding
# honest: EmbeddingOptions for the table, keeps d_model and computes the scale in forward with std::sqrt, calls lut->forward
# ruff: noqa
CppEmbedding = compile_module(
    "Embedding",
    r"""
struct EmbeddingImpl : torch::nn::Module {
  EmbeddingImpl(int64_t vocab_size, int64_t d_model) : dim(d_model) {
    lut = register_module("lut", torch::nn::Embedding(torch::nn::EmbeddingOptions(vocab_size, d_model)));
  }

  torch::Tensor forward(torch::Tensor tokens) {
    return lut->forward(tokens).mul(std::sqrt(static_cast<double>(dim)));
  }

  torch::nn::Embedding lut{nullptr};
  double scale = 1.0;
  int64_t dim = 1;
};
""",
)
