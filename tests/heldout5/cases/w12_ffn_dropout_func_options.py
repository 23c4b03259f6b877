# exercise: CppPositionwiseFeedForward
# mistake: torch::nn::functional::dropout with DropoutFuncOptions().p(...) only: its training flag defaults to true, so it drops in eval mode too
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
    namespace F = torch::nn::functional;
    auto hidden = F::relu(linear1(x));
    hidden = F::dropout(hidden, F::DropoutFuncOptions().p(dropout_p));
    return linear2(hidden);
  }

  torch::nn::Linear linear1{nullptr}, linear2{nullptr};
  double dropout_p = 0.0;
};
""",
)
