"""Lesson 12: the C++ twins of lessons 01, 07 and 05, written against LibTorch.

Each is a ``torch::nn::Module`` whose submodules are registered under the contract's attribute
names, so that the Python reference's weights load by name. The C++ text is data here: importing
this module compiles nothing. ``build()`` compiles each as the lesson's exercise cell does (three
builds, cached, which the notebook and the tests share) and returns their Python classes.

The C++ marks its solution with ``// ### BEGIN SOLUTION`` comments: nbgrader replaces each such
region with its Python stub lines, which ``autograder.libtorch`` reads as C++ (a comment and a
``NotImplementedError``).
"""

from autograder.libtorch import CppModule, CppSource

CppEmbedding = CppSource(
    "Embedding",
    """
struct EmbeddingImpl : torch::nn::Module {
  // tokens: Long[B, T] -> [B, T, D]: the rows of the table lut, times sqrt(d_model)
  EmbeddingImpl(int64_t vocab_size, int64_t d_model) {
    // ### BEGIN SOLUTION
    lut = register_module("lut", torch::nn::Embedding(vocab_size, d_model));
    scale = std::sqrt(static_cast<double>(d_model));
    // ### END SOLUTION
  }

  torch::Tensor forward(torch::Tensor tokens) {
    // ### BEGIN SOLUTION
    return lut(tokens) * scale;  // [B, T, D]
    // ### END SOLUTION
  }

  torch::nn::Embedding lut{nullptr};  // registered as "lut", so weights load by that name
  double scale = 1.0;
};
""",
)

CppPositionwiseFeedForward = CppSource(
    "PositionwiseFeedForward",
    """
struct PositionwiseFeedForwardImpl : torch::nn::Module {
  // x: [B, T, D] -> linear2(dropout(relu(linear1(x)))): [B, T, D]
  PositionwiseFeedForwardImpl(int64_t d_model, int64_t d_ff, double dropout) {
    // ### BEGIN SOLUTION
    linear1 = register_module("linear1", torch::nn::Linear(d_model, d_ff));
    linear2 = register_module("linear2", torch::nn::Linear(d_ff, d_model));
    dropout_p = dropout;
    // ### END SOLUTION
  }

  torch::Tensor forward(torch::Tensor x) {
    // ### BEGIN SOLUTION
    auto hidden = torch::relu(linear1(x));  // [B, T, d_ff]
    return linear2(torch::dropout(hidden, dropout_p, is_training()));  // [B, T, D]
    // ### END SOLUTION
  }

  torch::nn::Linear linear1{nullptr}, linear2{nullptr};
  double dropout_p = 0.0;
};
""",
)

CppMultiHeadAttention = CppSource(
    "MultiHeadAttention",
    """
struct MultiHeadAttentionImpl : torch::nn::Module {
  // query: [B, T_q, D], key and value: [B, T_k, D], mask: Bool broadcastable to [B, h, T_q, T_k]
  // (true = may attend) -> [B, T_q, D]; the weights [B, h, T_q, T_k] stay in attn
  MultiHeadAttentionImpl(int64_t d_model, int64_t n_heads, double dropout) {
    // ### BEGIN SOLUTION
    TORCH_CHECK_VALUE(d_model % n_heads == 0, "d_model must be divisible by n_heads, got d_model=",
                      d_model, ", n_heads=", n_heads);
    h = n_heads;
    d_k = d_model / n_heads;
    dropout_p = dropout;
    w_q = register_module("w_q", torch::nn::Linear(d_model, d_model));
    w_k = register_module("w_k", torch::nn::Linear(d_model, d_model));
    w_v = register_module("w_v", torch::nn::Linear(d_model, d_model));
    w_o = register_module("w_o", torch::nn::Linear(d_model, d_model));
    // ### END SOLUTION
  }

  torch::Tensor forward(torch::Tensor query, torch::Tensor key, torch::Tensor value,
                        std::optional<torch::Tensor> mask = std::nullopt) {
    // ### BEGIN SOLUTION
    auto batch = query.size(0);
    // [B, T, D] -> [B, T, h, d_k] -> [B, h, T, d_k]
    auto split = [&](torch::Tensor x) { return x.view({batch, x.size(1), h, d_k}).transpose(1, 2); };
    auto q = split(w_q(query)), k = split(w_k(key)), v = split(w_v(value));
    auto scores = torch::matmul(q, k.transpose(-2, -1)) / std::sqrt(static_cast<double>(d_k));
    if (mask) {
      scores = scores.masked_fill(mask->logical_not(), -std::numeric_limits<double>::infinity());
    }
    auto weights = torch::softmax(scores, -1);  // [B, h, T_q, T_k]
    if (mask) {
      weights = weights.masked_fill(mask->logical_not(), 0.0);  // a fully masked row: NaN -> 0
    }
    attn = weights;
    auto out = torch::matmul(torch::dropout(weights, dropout_p, is_training()), v);  // [B, h, T_q, d_k]
    return w_o(out.transpose(1, 2).contiguous().view({batch, query.size(1), h * d_k}));  // [B, T_q, D]
    // ### END SOLUTION
  }

  int64_t h = 1, d_k = 1;
  double dropout_p = 0.0;
  torch::nn::Linear w_q{nullptr}, w_k{nullptr}, w_v{nullptr}, w_o{nullptr};
  torch::Tensor attn;  // the last attention weights, read from Python as .attn
};
""",
)

SOURCES = (CppEmbedding, CppPositionwiseFeedForward, CppMultiHeadAttention)


def build(verbose: bool = False) -> dict[str, type[CppModule]]:
    """The three reference modules: "Embedding", "PositionwiseFeedForward" and "MultiHeadAttention" ->
    their Python classes (``CppModule``s). Each is built as the lesson's exercise cell builds it, so
    the notebook, the tests and the benchmark share the same three cached builds."""
    return {exercise.name: exercise.compile(verbose) for exercise in SOURCES}
