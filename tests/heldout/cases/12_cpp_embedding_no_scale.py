# exercise: CppEmbedding
# mistake: sets scale in the constructor but forward returns lut(tokens) without multiplying by it
# ruff: noqa: N806, E741, B905, E501 - a learner's style, kept as written
from autograder.libtorch import compile_module

CppEmbedding = compile_module(
    "Embedding",
    r"""
struct EmbeddingImpl : torch::nn::Module {
  // tokens: Long[B, T] -> [B, T, D]: the rows of the table lut, times sqrt(d_model)
  EmbeddingImpl(int64_t vocab_size, int64_t d_model) {
    lut = register_module("lut", torch::nn::Embedding(vocab_size, d_model));
    scale = std::sqrt(static_cast<double>(d_model));
  }

  torch::Tensor forward(torch::Tensor tokens) {
    return lut(tokens);
  }

  torch::nn::Embedding lut{nullptr};  // registered as "lut", so weights load by that name
  double scale = 1.0;
};
""",
)
