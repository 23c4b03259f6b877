# exercise: CppPositionwiseFeedForward
# mistake: torch::dropout(hidden, dropout_p, true) drops in eval mode too (train flag hard-coded instead of is_training())
# ruff: noqa
CppPositionwiseFeedForward = compile_module(
    "PositionwiseFeedForward",
    r"""
struct PositionwiseFeedForwardImpl : torch::nn::Module {
  PositionwiseFeedForwardImpl(int64_t d_model, int64_t d_ff, double dropout) {
    linear1 = register_module("linear1", torch::nn::Linear(d_model, d_ff));
    linear2 = register_module("linear2", torch::nn::Linear(d_ff, d_model));
    dropout_p = dropout;
  }

  torch::Tensor forward(torch::Tensor x) {
    auto h = torch::relu(linear1(x));
    return linear2(torch::dropout(h, dropout_p, /*train=*/true));
  }

  torch::nn::Linear linear1{nullptr}, linear2{nullptr};
  double dropout_p = 0.0;
};
""",
)
