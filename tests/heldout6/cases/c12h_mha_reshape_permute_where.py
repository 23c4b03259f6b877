# exercise: CppMultiHeadAttention
# honest: reshape and permute for the heads, torch::where for the mask, nan_to_num for fully masked rows, reshape to merge
# ruff: noqa
CppMultiHeadAttention = compile_module(
    "MultiHeadAttention",
    r"""
struct MultiHeadAttentionImpl : torch::nn::Module {
  MultiHeadAttentionImpl(int64_t d_model, int64_t n_heads, double dropout) {
    TORCH_CHECK_VALUE(n_heads > 0 && d_model % n_heads == 0,
                      "d_model must be divisible by n_heads, got d_model=", d_model, ", n_heads=", n_heads);
    h = n_heads;
    d_k = d_model / n_heads;
    dropout_p = dropout;
    w_q = register_module("w_q", torch::nn::Linear(torch::nn::LinearOptions(d_model, d_model).bias(true)));
    w_k = register_module("w_k", torch::nn::Linear(torch::nn::LinearOptions(d_model, d_model).bias(true)));
    w_v = register_module("w_v", torch::nn::Linear(torch::nn::LinearOptions(d_model, d_model).bias(true)));
    w_o = register_module("w_o", torch::nn::Linear(torch::nn::LinearOptions(d_model, d_model).bias(true)));
  }

  torch::Tensor heads(const torch::Tensor& x) {
    return x.reshape({x.size(0), x.size(1), h, d_k}).permute({0, 2, 1, 3});
  }

  torch::Tensor forward(torch::Tensor query, torch::Tensor key, torch::Tensor value,
                        std::optional<torch::Tensor> mask = std::nullopt) {
    auto q = heads(w_q->forward(query));
    auto k = heads(w_k->forward(key));
    auto v = heads(w_v->forward(value));
    auto scores = torch::matmul(q, k.transpose(-1, -2)) * (1.0 / std::sqrt(static_cast<double>(d_k)));
    if (mask.has_value()) {
      auto neg_inf = torch::full({}, -std::numeric_limits<double>::infinity(), scores.options());
      scores = torch::where(*mask, scores, neg_inf);
    }
    auto weights = torch::nan_to_num(torch::softmax(scores, -1), 0.0);
    attn = weights;
    if (is_training() && dropout_p > 0.0) {
      weights = torch::dropout(weights, dropout_p, true);
    }
    auto out = torch::matmul(weights, v).permute({0, 2, 1, 3});
    return w_o->forward(out.reshape({query.size(0), query.size(1), h * d_k}));
  }

  int64_t h = 1, d_k = 1;
  double dropout_p = 0.0;
  torch::nn::Linear w_q{nullptr}, w_k{nullptr}, w_v{nullptr}, w_o{nullptr};
  torch::Tensor attn;
};
""",
)
