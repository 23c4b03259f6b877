# exercise: CppEmbedding
# mistake: declares a local `double scale` in the constructor, shadowing the member, so the member stays 1.0 and the output is never scaled by sqrt(d_model)
# ruff: noqa
CppEmbedding = compile_module(
    "Embedding",
    r"""
struct EmbeddingImpl : torch::nn::Module {
  EmbeddingImpl(int64_t vocab_size, int64_t d_model) {
    lut = register_module("lut", torch::nn::Embedding(vocab_size, d_model));
    double scale = std::sqrt(static_cast<double>(d_model));
    (void)scale;
  }

  torch::Tensor forward(torch::Tensor tokens) {
    return lut(tokens) * scale;
  }

  torch::nn::Embedding lut{nullptr};
  double scale = 1.0;
};
""",
)
