"""Lesson 12 in C++: alternative correct implementations (the checks must accept each) and the
catalogued mistakes written as C++ (tests/test_libtorch_mutations.py: each must be named).

Everything here compiles in one build, on first use (``compiled``), never at import: collecting
the tests costs no compile. An alternative is a factory that builds the compiled module.
"""

import functools
import re

from autograder.libtorch import CppModule, Part, compile_many
from solutions import libtorch as reference

EMBEDDING_FUNCTIONAL = """
struct EmbeddingImpl : torch::nn::Module {
  // torch::embedding on the registered table's weight, the scale computed in forward
  EmbeddingImpl(int64_t vocab_size, int64_t d_model)
      : lut(register_module("lut", torch::nn::Embedding(vocab_size, d_model))) {}
  torch::Tensor forward(torch::Tensor tokens) {
    auto d_model = static_cast<double>(lut->options.embedding_dim());
    return torch::embedding(lut->weight, tokens) * std::sqrt(d_model);
  }
  torch::nn::Embedding lut;
};
"""

EMBEDDING_MUL = """
#include <numeric>
struct EmbeddingImpl : torch::nn::Module {
  // the initialiser list, forward() called by name, and .mul with a scalar computed as a power
  EmbeddingImpl(int64_t vocab_size, int64_t d_model)
      : lut(register_module("lut", torch::nn::Embedding(torch::nn::EmbeddingOptions(vocab_size, d_model)))),
        root(std::pow(static_cast<double>(d_model), 0.5)) {}
  torch::Tensor forward(torch::Tensor tokens) { return lut->forward(tokens).mul(root); }
  torch::nn::Embedding lut;
  double root;
};
"""

EMBEDDING_INT = """
struct EmbeddingImpl : torch::nn::Module {
  // int arguments, not int64_t, and std::sqrt of the int itself (a double)
  EmbeddingImpl(int vocab_size, int d_model) : scale(std::sqrt(d_model)) {
    lut = register_module("lut", torch::nn::Embedding(vocab_size, d_model));
  }
  torch::Tensor forward(torch::Tensor tokens) { return lut->forward(tokens) * scale; }
  torch::nn::Embedding lut{nullptr};
  double scale;
};
"""

FEED_FORWARD_CLAMP = """
struct PositionwiseFeedForwardImpl : torch::nn::Module {
  // ReLU as clamp_min(0), members registered in the initialiser list
  PositionwiseFeedForwardImpl(int64_t d_model, int64_t d_ff, double dropout)
      : linear1(register_module("linear1", torch::nn::Linear(d_model, d_ff))),
        linear2(register_module("linear2", torch::nn::Linear(d_ff, d_model))),
        p(dropout) {}
  torch::Tensor forward(torch::Tensor x) {
    auto hidden = torch::clamp_min(linear1->forward(x), 0.0);
    return linear2->forward(is_training() ? torch::dropout(hidden, p, true) : hidden);
  }
  torch::nn::Linear linear1, linear2;
  double p;
};
"""

FEED_FORWARD_FUNCTIONAL = """
namespace F = torch::nn::functional;
struct PositionwiseFeedForwardImpl : torch::nn::Module {
  // torch::nn::functional::linear on the registered layers' weights, relu_ in place on a new tensor
  PositionwiseFeedForwardImpl(int64_t d_model, int64_t d_ff, double dropout) {
    linear1 = register_module("linear1", torch::nn::Linear(d_model, d_ff));
    linear2 = register_module("linear2", torch::nn::Linear(d_ff, d_model));
    drop = register_module("drop", torch::nn::Dropout(dropout));
  }
  torch::Tensor forward(torch::Tensor x) {
    auto hidden = F::linear(x, linear1->weight, linear1->bias).relu_();
    return F::linear(drop(hidden), linear2->weight, linear2->bias);
  }
  torch::nn::Linear linear1{nullptr}, linear2{nullptr};
  torch::nn::Dropout drop{nullptr};
};
"""

FEED_FORWARD_INT = """
namespace F = torch::nn::functional;
struct PositionwiseFeedForwardImpl : torch::nn::Module {
  // int sizes and a float probability; functional dropout told the module's mode
  PositionwiseFeedForwardImpl(int d_model, int d_ff, float dropout) : p(dropout) {
    linear1 = register_module("linear1", torch::nn::Linear(d_model, d_ff));
    linear2 = register_module("linear2", torch::nn::Linear(d_ff, d_model));
  }
  torch::Tensor forward(torch::Tensor x) {
    auto hidden = torch::relu(linear1(x));
    return linear2(F::dropout(hidden, F::DropoutFuncOptions().p(p).training(is_training())));
  }
  torch::nn::Linear linear1{nullptr}, linear2{nullptr};
  float p;
};
"""

MHA_EINSUM = """
struct MultiHeadAttentionImpl : torch::nn::Module {
  // reshape and permute, einsum for the scores, torch::where for the mask, NaN rows set to zero
  MultiHeadAttentionImpl(int64_t d_model, int64_t n_heads, double dropout) : h(n_heads), p(dropout) {
    if (d_model % n_heads != 0) {
      throw c10::ValueError({__func__, __FILE__, static_cast<uint32_t>(__LINE__)},
                            "d_model is not divisible by n_heads");
    }
    for (auto name : {"w_q", "w_k", "w_v", "w_o"}) {
      linears.push_back(register_module(name, torch::nn::Linear(d_model, d_model)));
    }
  }
  torch::Tensor heads(const torch::Tensor& x) {
    return x.reshape({x.size(0), x.size(1), h, -1}).permute({0, 2, 1, 3});
  }
  torch::Tensor forward(torch::Tensor query, torch::Tensor key, torch::Tensor value,
                        std::optional<torch::Tensor> mask) {
    auto q = heads(linears[0](query)), k = heads(linears[1](key)), v = heads(linears[2](value));
    auto scores = torch::einsum("bhqd,bhkd->bhqk", {q, k}) / std::sqrt(static_cast<double>(q.size(-1)));
    if (mask) {
      scores = torch::where(*mask, scores, torch::full({}, -INFINITY, scores.options()));
    }
    attn = torch::nan_to_num(torch::softmax(scores, -1), 0.0);
    auto out = torch::einsum("bhqk,bhkd->bqhd", {torch::dropout(attn, p, is_training()), v});
    return linears[3](out.reshape({query.size(0), query.size(1), -1}));
  }
  int64_t h;
  double p;
  std::vector<torch::nn::Linear> linears;
  torch::Tensor attn;
};
"""

MHA_EINSUM_INT = """
struct MultiHeadAttentionImpl : torch::nn::Module {
  // int sizes; the heads stay [B, T, h, d_k] and torch::einsum contracts them (no transpose);
  // a registered torch::nn::Dropout, which .eval() switches off
  MultiHeadAttentionImpl(int d_model, int n_heads, double dropout) : h(n_heads), d_k(d_model / n_heads) {
    TORCH_CHECK_VALUE(d_model % n_heads == 0, "d_model must be a multiple of n_heads");
    w_q = register_module("w_q", torch::nn::Linear(d_model, d_model));
    w_k = register_module("w_k", torch::nn::Linear(d_model, d_model));
    w_v = register_module("w_v", torch::nn::Linear(d_model, d_model));
    w_o = register_module("w_o", torch::nn::Linear(d_model, d_model));
    drop = register_module("drop", torch::nn::Dropout(dropout));
  }
  torch::Tensor forward(torch::Tensor query, torch::Tensor key, torch::Tensor value,
                        std::optional<torch::Tensor> mask) {
    const int batch = query.size(0);
    auto q = w_q(query).view({batch, -1, h, d_k});
    auto k = w_k(key).view({batch, -1, h, d_k});
    auto v = w_v(value).view({batch, -1, h, d_k});
    auto scores = torch::einsum("bqhd,bkhd->bhqk", {q, k}) / std::sqrt(d_k);
    if (mask.has_value()) {
      scores = scores.masked_fill(mask.value() == 0, -INFINITY);
    }
    attn = torch::softmax(scores, -1);
    if (mask.has_value()) {
      attn = attn.masked_fill(mask.value() == 0, 0);
    }
    auto out = torch::einsum("bhqk,bkhd->bqhd", {drop(attn), v});
    return w_o(out.reshape({batch, -1, h * d_k}));
  }
  int h, d_k;
  torch::nn::Linear w_q{nullptr}, w_k{nullptr}, w_v{nullptr}, w_o{nullptr};
  torch::nn::Dropout drop{nullptr};
  torch::Tensor attn;
};
"""

MHA_HEAD_BY_HEAD = """
struct MultiHeadAttentionImpl : torch::nn::Module {
  // one head at a time, its d_k columns taken with narrow; heads concatenated along the features
  MultiHeadAttentionImpl(int64_t d_model, int64_t n_heads, double dropout)
      : h(n_heads), d_k(d_model / n_heads) {
    TORCH_CHECK_VALUE(d_k * n_heads == d_model, "d_model must be divisible by n_heads");
    w_q = register_module("w_q", torch::nn::Linear(d_model, d_model));
    w_k = register_module("w_k", torch::nn::Linear(d_model, d_model));
    w_v = register_module("w_v", torch::nn::Linear(d_model, d_model));
    w_o = register_module("w_o", torch::nn::Linear(d_model, d_model));
  }
  torch::Tensor forward(torch::Tensor query, torch::Tensor key, torch::Tensor value,
                        std::optional<torch::Tensor> mask) {
    auto q = w_q(query), k = w_k(key), v = w_v(value);
    std::vector<torch::Tensor> outs, weights;
    for (int64_t i = 0; i < h; ++i) {
      auto qi = q.narrow(-1, i * d_k, d_k), ki = k.narrow(-1, i * d_k, d_k), vi = v.narrow(-1, i * d_k, d_k);
      auto scores = qi.matmul(ki.transpose(1, 2)).div(std::sqrt(static_cast<double>(d_k)));  // [B, T_q, T_k]
      torch::Tensor allowed;
      if (mask) {
        allowed = mask->dim() == 4 ? mask->select(1, mask->size(1) == 1 ? 0 : i) : *mask;
        allowed = allowed.expand_as(scores);
        scores = scores.masked_fill(~allowed, -std::numeric_limits<double>::infinity());
      }
      auto w = scores.softmax(-1);
      if (mask) w = w.masked_fill(~allowed, 0.0);
      weights.push_back(w);
      outs.push_back(w.matmul(vi));
    }
    attn = torch::stack(weights, 1);
    return w_o(torch::cat(outs, -1));
  }
  int64_t h, d_k;
  torch::nn::Linear w_q{nullptr}, w_k{nullptr}, w_v{nullptr}, w_o{nullptr};
  torch::Tensor attn;
};
"""

CPP_ALTERNATIVES = {
    "CppEmbedding": {
        "EmbeddingFunctional": EMBEDDING_FUNCTIONAL,
        "EmbeddingMul": EMBEDDING_MUL,
        "EmbeddingInt": EMBEDDING_INT,
    },
    "CppPositionwiseFeedForward": {
        "FeedForwardClamp": FEED_FORWARD_CLAMP,
        "FeedForwardFunctional": FEED_FORWARD_FUNCTIONAL,
        "FeedForwardInt": FEED_FORWARD_INT,
    },
    "CppMultiHeadAttention": {
        "MultiHeadAttentionEinsum": MHA_EINSUM,
        "MultiHeadAttentionHeadByHead": MHA_HEAD_BY_HEAD,
        "MultiHeadAttentionEinsumInt": MHA_EINSUM_INT,
    },
}

REFERENCES = {
    "CppEmbedding": reference.CppEmbedding,
    "CppPositionwiseFeedForward": reference.CppPositionwiseFeedForward,
    "CppMultiHeadAttention": reference.CppMultiHeadAttention,
}

# exercise -> mistake's name (as catalogued) -> the edits that turn the reference into it: (old, new),
# each ``old`` found in the reference exactly as often as ``count`` says (once by default)
MUTANTS = {
    "CppEmbedding": {
        "no sqrt(d_model) scale": [("return lut(tokens) * scale;", "return lut(tokens);")],
        "scaled by d_model instead of sqrt(d_model)": [
            ("scale = std::sqrt(static_cast<double>(d_model));", "scale = static_cast<double>(d_model);")
        ],
    },
    "CppPositionwiseFeedForward": {
        "no ReLU": [("torch::relu(linear1(x))", "linear1(x)")],
        "ReLU after linear2 too": [
            (
                "return linear2(torch::dropout(hidden, dropout_p, is_training()));",
                "return torch::relu(linear2(torch::dropout(hidden, dropout_p, is_training())));",
            )
        ],
        "dropout also in eval mode": [
            (
                "torch::dropout(hidden, dropout_p, is_training())",
                "torch::dropout(hidden, dropout_p, /*train=*/true)",
            )
        ],
        "no dropout in training": [("torch::dropout(hidden, dropout_p, is_training())", "hidden")],
        "dropout on the output": [
            (
                "return linear2(torch::dropout(hidden, dropout_p, is_training()));",
                "return torch::dropout(linear2(hidden), dropout_p, is_training());",
            )
        ],
    },
    "CppMultiHeadAttention": {
        "no scaling": [(" / std::sqrt(static_cast<double>(d_k))", "")],
        "softmax over the wrong dimension": [("torch::softmax(scores, -1)", "torch::softmax(scores, -2)")],
        "scores divided by d_model instead of sqrt(d_k)": [
            ("/ std::sqrt(static_cast<double>(d_k))", "/ static_cast<double>(h * d_k)")
        ],
        "scaled by d_k instead of sqrt(d_k)": [
            ("/ std::sqrt(static_cast<double>(d_k))", "/ static_cast<double>(d_k)")
        ],
        "scaled by sqrt(D) instead of sqrt(d_k)": [
            ("/ std::sqrt(static_cast<double>(d_k))", "/ std::sqrt(static_cast<double>(h * d_k))")
        ],
        "heads split with view, without transpose": [
            ("x.view({batch, x.size(1), h, d_k}).transpose(1, 2)", "x.view({batch, h, x.size(1), d_k})")
        ],
        "heads split and merged with view, without transposes": [
            ("x.view({batch, x.size(1), h, d_k}).transpose(1, 2)", "x.view({batch, h, x.size(1), d_k})"),
            ("w_o(out.transpose(1, 2).contiguous().view(", "w_o(out.contiguous().view("),
        ],
        "mask read as True = masked": [("mask->logical_not()", "*mask")],
        "masked_fill(mask == 0, -1e9): a fully masked row is not zero": [
            (
                "scores.masked_fill(mask->logical_not(), -std::numeric_limits<double>::infinity())",
                "scores.masked_fill(*mask == 0, -1e9)",
            ),
            ("weights = weights.masked_fill(mask->logical_not(), 0.0);", ""),
        ],
        "no output projection": [("return w_o(out.transpose(1, 2)", "return (out.transpose(1, 2)")],
        "dropout also in eval mode": [
            (
                "torch::dropout(weights, dropout_p, is_training())",
                "torch::dropout(weights, dropout_p, /*train=*/true)",
            )
        ],
    },
}

SOLUTION = re.compile(
    r"^(?P<indent>[ \t]*)// ### BEGIN SOLUTION\n.*?^[ \t]*// ### END SOLUTION\n", re.M | re.S
)


def mutated(source: str, edits: list[tuple[str, str]]) -> str:
    """``source`` with each edit made everywhere; an edit whose text is missing is a ValueError
    (the reference changed: the mutant would silently be the reference)."""
    for old, new in edits:
        if old not in source:
            raise ValueError(f"the reference no longer holds {old!r}")
        source = source.replace(old, new)
    return source


def stubbed(source: str) -> str:
    """``source`` as nbgrader leaves it for the learner: each solution region replaced by its stub."""
    return SOLUTION.sub(
        lambda m: f"{m['indent']}# YOUR CODE HERE\n{m['indent']}raise NotImplementedError()\n", source
    )


def _label(text: str) -> str:
    return re.sub(r"\W+", "_", text).strip("_")


def _parts() -> dict[tuple[str, str], Part]:
    """(exercise, what) -> its part: "reference", "stub", each alternative's and each mistake's name."""
    parts = {}
    for exercise, source in REFERENCES.items():
        binding = source.name
        variants = {"reference": source.source, "stub": stubbed(source.source)}
        variants |= CPP_ALTERNATIVES[exercise]
        variants |= {name: mutated(source.source, edits) for name, edits in MUTANTS[exercise].items()}
        for what, text in variants.items():
            parts[exercise, what] = Part(_label(f"{binding}_{what}"), binding, text)
    return parts


@functools.cache
def compiled() -> dict[tuple[str, str], type[CppModule]]:
    """Every variant above, compiled in one build: (exercise, what) -> its Python class."""
    parts = _parts()
    classes = compile_many(list(parts.values()))
    return {key: classes[part.label] for key, part in parts.items()}


def _factory(exercise: str, what: str):
    def build(*args, **kwargs):
        return compiled()[exercise, what](*args, **kwargs)

    build.__name__ = what
    return build


ALTERNATIVES = {
    exercise: [_factory(exercise, name) for name in alternatives]
    for exercise, alternatives in CPP_ALTERNATIVES.items()
}
