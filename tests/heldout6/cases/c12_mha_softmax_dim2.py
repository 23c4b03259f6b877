# exercise: CppMultiHeadAttention
# mistake: softmax over dim 2 (the queries) instead of the last dim (the keys)
# ruff: noqa
CppMultiHeadAttention = compile_module(
    "MultiHeadAttention",
    r"""
struct MultiHeadAttentionImpl : torch::nn::Module {
  MultiHeadAttentionImpl(int64_t d_model, int64_t n_heads, double dropout) {
    TORCH_CHECK_VALUE(d_model % n_heads == 0, "d_model (", d_model, ") must be divisible by n_heads (", n_heads, ")");
    h = n_heads;
    d_k = d_model / n_heads;
    dropout_p = dropout;
    w_q = register_module("w_q", torch::nn::Linear(d_model, d_model));
    w_k = register_module("w_k", torch::nn::Linear(d_model, d_model));
    w_v = register_module("w_v", torch::nn::Linear(d_model, d_model));
    w_o = register_module("w_o", torch::nn::Linear(d_model, d_model));
  }

  torch::Tensor forward(torch::Tensor query, torch::Tensor key, torch::Tensor value,
                        std::optional<torch::Tensor> mask = std::nullopt) {
    auto B = query.size(0);
    auto q = w_q(query).view({B, -1, h, d_k}).transpose(1, 2);
    auto k = w_k(key).view({B, -1, h, d_k}).transpose(1, 2);
    auto v = w_v(value).view({B, -1, h, d_k}).transpose(1, 2);
    auto scores = torch::matmul(q, k.transpose(-2, -1)) / std::sqrt((double)d_k);
    if (mask.has_value()) {
      scores = scores.masked_fill(~mask.value(), -std::numeric_limits<double>::infinity());
    }
    auto weights = torch::softmax(scores, 2);
    if (mask.has_value()) {
      weights = weights.masked_fill(~mask.value(), 0.0);
    }
    attn = weights;
    auto out = torch::matmul(torch::dropout(weights, dropout_p, is_training()), v);
    return w_o(out.transpose(1, 2).contiguous().view({B, -1, h * d_k}));
  }

  int64_t h = 1, d_k = 1;
  double dropout_p = 0.0;
  torch::nn::Linear w_q{nullptr}, w_k{nullptr}, w_v{nullptr}, w_o{nullptr};
  torch::Tensor attn;
};
""",
)
