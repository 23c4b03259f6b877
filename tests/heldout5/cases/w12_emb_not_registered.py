# exercise: CppEmbedding
# mistake: lut is assigned but never registered with register_module, so it is no submodule and its weight has no name to load by
# ruff: noqa
CppEmbedding = compile_module(
    "Embedding",
    r"""
struct EmbeddingImpl : torch::nn::Module {
  // tokens: Long[B, T] -> [B, T, D]: the rows of the table lut, times sqrt(d_model)
  EmbeddingImpl(int64_t vocab_size, int64_t d_model) {
    lut = torch::nn::Embedding(vocab_size, d_model);
    scale = std::sqrt(static_cast<double>(d_model));
  }

  torch::Tensor forward(torch::Tensor tokens) {
    return lut(tokens) * scale;
  }

  torch::nn::Embedding lut{nullptr};  // registered as "lut", so weights load by that name
  double scale = 1.0;
};
""",
)
