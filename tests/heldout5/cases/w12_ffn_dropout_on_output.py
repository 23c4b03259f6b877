# exercise: CppPositionwiseFeedForward
# mistake: dropout applied to linear2's output instead of between relu and linear2
# ruff: noqa
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
    auto y = linear2(torch::relu(linear1(x)));
    return torch::dropout(y, dropout_p, is_training());
  }

  torch::nn::Linear linear1{nullptr}, linear2{nullptr};
  double dropout_p = 0.0;
};
""",
)
