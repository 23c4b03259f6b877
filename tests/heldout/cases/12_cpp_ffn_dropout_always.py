# exercise: CppPositionwiseFeedForward
# mistake: torch::dropout(hidden, dropout_p, true): drops in eval mode too (train flag hard-coded)
# ruff: noqa: N806, E741, B905, E501 - a learner's style, kept as written
from autograder.libtorch import compile_module

CppPositionwiseFeedForward = compile_module(
    "PositionwiseFeedForward",
    r"""
struct PositionwiseFeedForwardImpl : torch::nn::Module {
  // x: [B, T, D] -> linear2(dropout(relu(linear1(x)))): [B, T, D]
  PositionwiseFeedForwardImpl(int64_t d_model, int64_t d_ff, double dropout) {
    linear1 = register_module("linear1", torch::nn::Linear(d_model, d_ff));
    linear2 = register_module("linear2", torch::nn::Linear(d_ff, d_model));
    dropout_p = dropout;
  }

  torch::Tensor forward(torch::Tensor x) {
    auto hidden = torch::relu(linear1(x));
    return linear2(torch::dropout(hidden, dropout_p, true));
  }

  torch::nn::Linear linear1{nullptr}, linear2{nullptr};
  double dropout_p = 0.0;
};
""",
)
