"""Checks for lesson 12: the C++ twins of Embedding, PositionwiseFeedForward and MultiHeadAttention.

The learner's C++ comes to the checks compiled (``autograder.libtorch``), as an ``nn.Module`` whose
submodules are the registered C++ ones, so the checks are those of lessons 01, 07 and 05 in
spirit: the same oracles (``nn.Embedding`` times sqrt(D), ``nn.TransformerEncoderLayer``'s
feed-forward block, ``nn.MultiheadAttention``) with their weights loaded by the contract's names,
float64 inputs with B != T and T_q != T_k, a mask that leaves one query no key at all, and the
modules with a dropout built once more with dropout 0.3, which in eval mode must drop nothing. What
differs is the catalogue: the mistakes are the ones C++ code makes, and the hints speak C++, but for
the mistakes lessons 03 and 05 name too (shared_with), whose hints are written once, there.

Lesson 12 is answered in C++: every check and hidden test first makes sure (``expect_compiled``)
that what it received is a class ``compile_module`` built for the exercise's own module, so that a
Python class put in its place (``CppEmbedding = Embedding`` in a cell added below) scores nothing.
"""

import functools
import math
from types import SimpleNamespace
from typing import Any

import torch
from torch import nn
from torch.nn import functional as F

from autograder import libtorch
from autograder.checks import core, multi_head
from autograder.checks.answers import Expected, answer
from autograder.checks.device import random_mask, random_tensor
from autograder.checks.embedding import expect_lut_size, tokens_for
from autograder.checks.eval_mode import (
    DROPOUT_IN_EVAL,
    DROPOUT_ON_OUTPUT,
    EVAL_DROPOUT,
    NO_DROPOUT_IN_TRAINING,
    built_dropout,
    expect_dropout_in_training,
    expect_dropout_off_in_eval,
)
from autograder.checks.feed_forward import torch_encoder_layer, torch_feed_forward
from autograder.checks.multi_head import keeps_global_rng, torch_expected
from autograder.checks.oracles import feed_forward_state, mha_state, torch_mha

EMBEDDING, FEED_FORWARD, MHA = "CppEmbedding", "CppPositionwiseFeedForward", "CppMultiHeadAttention"
B, T, V, D, D_FF = 2, 5, 11, 6, 20
H, D_K, T_Q, T_K = 3, 4, 5, 7
D_MHA = H * D_K
LINEARS = ("w_q", "w_k", "w_v", "w_o")
REGISTER = 'register_module("{name}", ...) in the constructor, so that weights load by the name {name}'


def _asked(cls: Any) -> Any:
    """What ``cls`` says it was built for: under the judge, ``cls`` is a handle and the kernel's
    record of what compile_module made (``CppModule.built_binding``) answers."""
    try:
        return cls.built_binding()
    except Exception:  # noqa: BLE001 - no such method (a Python class), or it broke: not built
        return None


def _named(cls: Any) -> str:
    """The name ``cls`` gives itself, the same here and under the judge (where it is a handle)."""
    try:
        return str(cls.__name__)
    except Exception:  # noqa: BLE001 - an object without a name
        return "an object"


def expect_compiled(exercise: str, cls: Any) -> None:
    """``cls`` must be the class that compile_module built for ``exercise``'s own module: here it is
    looked up, by identity, in what autograder.libtorch made in this process; under the judge the
    kernel's record answers through the handle. Anything else fails, saying so."""
    binding = exercise.removeprefix("Cpp")
    built = libtorch.binding_built(cls) if isinstance(cls, type) else _asked(cls)
    if isinstance(built, str) and built == binding:
        return
    what = (
        f"a compiled C++ {built}"
        if isinstance(built, str)
        else f"{_named(cls)}, which compile_module did not build"
    )
    cell = f'{exercise} = compile_module("{binding}", r"""...""")'
    raise core.CheckFailure(
        f"{exercise}: lesson 12 is answered in C++, so {exercise} must be the class compile_module builds in "
        f"this exercise's own cell ({cell}); it is {what}, and the checks give it no points."
    )


def built(exercise: str, cls: Any, *args: Any) -> Any:
    """``core.build`` of a class compile_module built for ``exercise`` (``expect_compiled``)."""
    expect_compiled(exercise, cls)
    return core.build(exercise, cls, *args)


def by_value(mistakes: list[core.Mistake]) -> list[core.Mistake]:
    """The mistakes an output is matched against: all but dropout in eval mode, whose output is
    random (``expect_dropout_off_in_eval`` tells it by two calls that differ)."""
    return [mistake for mistake in mistakes if mistake.name != DROPOUT_IN_EVAL]


# ------------------------------------------------------------------------------ Embedding

EMBEDDING_MISTAKES = core.catalogue(
    EMBEDDING,
    {
        "no sqrt(d_model) scale": lambda self, tokens: self.lut(tokens),
        "scaled by d_model instead of sqrt(d_model)": lambda self, tokens: (
            self.lut(tokens) * self.lut.embedding_dim
        ),
    },
)


def embedding_module(cls, vocab_size: int, d_model: int):
    """The learner's compiled Embedding(vocab_size, d_model), its lut checked."""
    module = built(EMBEDDING, cls, vocab_size, d_model)
    how = REGISTER.format(name="lut") + " (a torch::nn::Embedding(vocab_size, d_model))."
    lut = core.expect_attribute(EMBEDDING, module, "lut", nn.Embedding, "a torch::nn::Embedding", how)
    expect_lut_size(EMBEDDING, lut, vocab_size, d_model, "torch::nn::Embedding")
    return module


def compare_embedding(module, tokens: torch.Tensor, expected: torch.Tensor) -> None:
    out = core.output(EMBEDDING, module, {"tokens": tokens})
    wrong = core.mistake_outputs(EMBEDDING_MISTAKES, module, tokens)
    core.expect_close(EMBEDDING, "the output", out, expected, "[B, T, D]", wrong)


def check_cpp_embedding(cls) -> None:
    """lut is a registered torch::nn::Embedding(V, D); the output equals nn.Embedding's times sqrt(D)."""
    oracle = nn.Embedding(V, D).to(device=random_tensor(1, seed=0).device, dtype=torch.float64)
    with torch.no_grad():
        oracle.weight.copy_(random_tensor(V, D, seed=1))
    module = embedding_module(cls, V, D)
    core.load_weights(EMBEDDING, module, {"lut.weight": oracle.weight.detach().clone()}, "lut")
    tokens = tokens_for(B, T, V, torch.Generator().manual_seed(2))
    with torch.no_grad():
        expected = oracle(tokens) * math.sqrt(D)
    compare_embedding(module, tokens, expected)
    core.passed(
        f"{EMBEDDING} registers lut and equals nn.Embedding (same weights) times sqrt({D}), [B, T, D]"
    )


# ------------------------------------------------------------------------------ feed-forward


def _ffn(module, x, activation=torch.relu, after=False, dropped=0.0, train_dropout="hidden"):
    """linear2(relu(linear1(x))) with one thing changed; ``dropped``: dropout that stays on; in
    train mode, the module's dropout on the hidden units (``train_dropout`` "hidden"), on nothing
    ("none") or on the output ("output"). A stand-in holding the linears is never in train mode."""
    training = getattr(module, "training", False)
    p = built_dropout(module) if training else 0.0
    hidden = activation(module.linear1(x))
    if dropped:
        hidden = F.dropout(hidden, dropped, training=True)
    if p and train_dropout == "hidden":
        hidden = F.dropout(hidden, p, training=True)
    out = module.linear2(hidden)
    out = torch.relu(out) if after else out
    return F.dropout(out, p, training=True) if p and train_dropout == "output" else out


FEED_FORWARD_MISTAKES = core.catalogue(
    FEED_FORWARD,
    {
        "no ReLU": lambda module, x: _ffn(module, x, activation=lambda h: h),
        "ReLU after linear2 too": lambda module, x: _ffn(module, x, after=True),
        DROPOUT_IN_EVAL: lambda module, x: _ffn(module, x, dropped=EVAL_DROPOUT),
        NO_DROPOUT_IN_TRAINING: lambda module, x: _ffn(module, x, train_dropout="none"),
        DROPOUT_ON_OUTPUT: lambda module, x: _ffn(module, x, train_dropout="output"),
    },
)


def compare_feed_forward(module, x: torch.Tensor, expected: torch.Tensor) -> None:
    out = core.output(FEED_FORWARD, module, {"x": x})
    stand_in = SimpleNamespace(linear1=module.linear1, linear2=module.linear2)
    wrong = core.mistake_outputs(by_value(FEED_FORWARD_MISTAKES), stand_in, x)
    core.expect_close(FEED_FORWARD, "the output", out, expected, "[B, T, D]", wrong)


def expect_feed_forward_dropout(cls, state: dict, x: torch.Tensor, expected: Expected) -> None:
    """The module built with dropout = EVAL_DROPOUT and the weights ``state``, in eval mode, gives
    ``expected()`` on two calls on ``x``: it drops nothing; then in train mode it drops hidden
    units (neither nothing nor entries of the output)."""
    module = feed_forward_module(cls, x.size(-1), state["linear1.weight"].size(0), EVAL_DROPOUT)
    core.load_weights(FEED_FORWARD, module, state, "linear1, linear2")
    run = functools.partial(core.output, FEED_FORWARD, module, {"x": x})
    expect_dropout_off_in_eval(FEED_FORWARD, FEED_FORWARD_MISTAKES, run, expected, "[B, T, D]")
    module.train()
    expect_dropout_in_training(FEED_FORWARD, FEED_FORWARD_MISTAKES, run, expected, EVAL_DROPOUT)


def feed_forward_module(cls, d_model: int, d_ff: int, dropout: float = 0.0):
    """The learner's compiled PositionwiseFeedForward(d_model, d_ff, dropout), in eval mode, its two
    layers checked."""
    module = built(FEED_FORWARD, cls, d_model, d_ff, dropout)
    for name, shape in (("linear1", (d_ff, d_model)), ("linear2", (d_model, d_ff))):
        how = REGISTER.format(name=name) + "."
        linear = core.expect_attribute(FEED_FORWARD, module, name, nn.Linear, "a torch::nn::Linear", how)
        letters = "[d_ff, D]" if name == "linear1" else "[D, d_ff]"
        core.expect_shape(FEED_FORWARD, f"{name}.weight", linear.weight, letters, shape)
    return module


@keeps_global_rng  # a dropout left on in eval mode draws from it
def check_cpp_feed_forward(cls) -> None:
    """linear1: D -> d_ff, linear2: d_ff -> D, registered; equal to torch's linear2(relu(linear1(x)))."""
    layer = torch_encoder_layer(D, D_FF, "relu", seed=20)
    module = feed_forward_module(cls, D, D_FF)
    core.load_weights(FEED_FORWARD, module, feed_forward_state(layer), "linear1, linear2")
    x = random_tensor(B, T, D, seed=30, scale=2.0)
    compare_feed_forward(module, x, torch_feed_forward(layer, x))
    expected = answer(torch_feed_forward, layer, x)
    expect_feed_forward_dropout(cls, feed_forward_state(layer), x, expected)
    core.passed(
        f"{FEED_FORWARD} registers linear1 and linear2 and equals torch's linear2(relu(linear1(x))); "
        f"built with dropout = {EVAL_DROPOUT}, it drops nothing in eval mode and hidden units in train mode"
    )


# ------------------------------------------------------------------------------ multi-head attention


def _attention(q, k, v, mask, scale, fill=-math.inf, zero_masked_rows=True, dim=-1, dropped=0.0):
    """softmax(q kᵀ / scale) v, the softmax over ``dim``; masked scores are ``fill``, and masked
    weights zeroed after the softmax unless ``zero_masked_rows`` is False (then a fully masked row
    gets uniform weights); ``dropped``: dropout on the weights that stays on in eval mode."""
    scores = q @ k.transpose(-2, -1) / scale
    if mask is not None:
        scores = scores.masked_fill(~mask, fill)
    weights = torch.softmax(scores, dim=dim)
    if mask is not None and zero_masked_rows:
        weights = weights.masked_fill(~mask, 0.0)
    return (F.dropout(weights, dropped, training=True) if dropped else weights) @ v


def _split(x, h):
    return x.reshape(x.size(0), x.size(1), h, x.size(2) // h).transpose(1, 2)


def _split_view_only(x, h):
    """x.view({B, h, T, d_k}) with no transpose: each 'head' is a block of consecutive positions."""
    return x.reshape(x.size(0), h, x.size(1), x.size(2) // h)


def _mha(
    m,
    query,
    key,
    value,
    mask=None,
    *,
    split=_split,
    scale=None,
    out=True,
    invert=False,
    seeds=False,
    dim=-1,
    dropped=0.0,
    merge_by_view=False,
):
    """The multi-head computation with one thing changed: the skeleton the mistakes share."""
    h = m.n_heads
    q, k, v = split(m.w_q(query), h), split(m.w_k(key), h), split(m.w_v(value), h)
    scale = math.sqrt(q.size(-1)) if scale is None else scale
    if mask is not None and invert:
        mask = ~mask
    fill, zero_masked_rows = (-1e9, False) if seeds else (-math.inf, True)
    heads = _attention(q, k, v, mask, scale, fill, zero_masked_rows, dim, dropped)
    heads = heads if merge_by_view else heads.transpose(1, 2)
    merged = heads.reshape(query.size(0), query.size(1), -1)
    return m.w_o(merged) if out else merged


MHA_MISTAKES = core.catalogue(
    MHA,
    {
        "no scaling": lambda m, q, k, v, mask=None: _mha(m, q, k, v, mask, scale=1.0),
        "scores divided by d_model instead of sqrt(d_k)": lambda m, q, k, v, mask=None: _mha(
            m, q, k, v, mask, scale=q.size(-1)
        ),
        "scaled by d_k instead of sqrt(d_k)": lambda m, q, k, v, mask=None: _mha(
            m, q, k, v, mask, scale=q.size(-1) // m.n_heads
        ),
        "softmax over the wrong dimension": lambda m, q, k, v, mask=None: _mha(m, q, k, v, mask, dim=-2),
        "scaled by sqrt(D) instead of sqrt(d_k)": lambda m, q, k, v, mask=None: _mha(
            m, q, k, v, mask, scale=math.sqrt(q.size(-1))
        ),
        "heads split with view, without transpose": lambda m, q, k, v, mask=None: _mha(
            m, q, k, v, mask, split=_split_view_only
        ),
        "heads split and merged with view, without transposes": lambda m, q, k, v, mask=None: _mha(
            m, q, k, v, mask, split=_split_view_only, merge_by_view=True
        ),
        "mask read as True = masked": lambda m, q, k, v, mask=None: _mha(m, q, k, v, mask, invert=True),
        "masked_fill(mask == 0, -1e9): a fully masked row is not zero": lambda m, q, k, v, mask=None: _mha(
            m, q, k, v, mask, seeds=True
        ),
        "no output projection": lambda m, q, k, v, mask=None: _mha(m, q, k, v, mask, out=False),
        DROPOUT_IN_EVAL: lambda m, q, k, v, mask=None: _mha(m, q, k, v, mask, dropped=EVAL_DROPOUT),
    },
)


def compare_mha(module, n_heads, query, key, value, mask, expected_out, expected_attn) -> None:
    """The output against ``expected_out`` (naming a known mistake), then ``attn``."""
    out = multi_head.output_of(module, query, key, value, mask, n_heads, exercise=MHA)
    wrong = core.mistake_outputs(
        by_value(MHA_MISTAKES), multi_head.stand_in(module, n_heads), query, key, value, mask
    )
    core.expect_close(MHA, "the output", out, expected_out, "[B, T_q, D]", wrong)
    attn = getattr(module, "attn", None)
    if not isinstance(attn, torch.Tensor) or attn.dim() == 0:
        raise core.CheckFailure(
            f"{MHA}: attn should hold the last attention weights [B, h, T_q, T_k]; assign them to the "
            "member attn in forward (attn = weights;), which the course binds for Python."
        )
    multi_head.expect_not_averaged(MHA, attn, expected_attn, "attn", "attn = weights;")
    scores = _scaled_scores(multi_head.stand_in(module, n_heads), query, key)
    if attn.shape == scores.shape and core.same(attn, scores):
        raise core.CheckFailure(
            f"{MHA}: attn holds the scores q kᵀ / sqrt(d_k), from before the softmax; it must hold the "
            "attention weights [B, h, T_q, T_k], each row summing to 1: assign attn = weights; after the "
            "softmax (and after zeroing a fully masked row)."
        )
    core.expect_close(MHA, "attn", attn, expected_attn, "[B, h, T_q, T_k]")


def _scaled_scores(m, query, key) -> torch.Tensor:
    """q kᵀ / sqrt(d_k) per head, [B, h, T_q, T_k], from the module's w_q and w_k."""
    with torch.no_grad():
        q, k = _split(m.w_q(query), m.n_heads), _split(m.w_k(key), m.n_heads)
        return q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))


def _mha_module(cls, seed: int):
    torch_module = torch_mha(D_MHA, H, seed=seed)
    module = built(MHA, cls, D_MHA, H)
    core.load_weights(MHA, module, mha_state(torch_module), "w_q, w_k, w_v, w_o")
    return torch_module, module


def expect_mha_in_eval(cls, n_heads: int, state: dict, inputs: dict[str, Any], expected: Expected) -> None:
    """The module built with dropout = EVAL_DROPOUT and the weights ``state``, in eval mode, gives
    ``expected()`` on two calls on ``inputs`` (query, key, value, mask): it drops nothing."""
    module = built(MHA, cls, state["w_q.weight"].size(0), n_heads, EVAL_DROPOUT)
    core.load_weights(MHA, module, state, "w_q, w_k, w_v, w_o")
    run = functools.partial(core.output, MHA, module, inputs)
    expect_dropout_off_in_eval(MHA, MHA_MISTAKES, run, expected, "[B, T_q, D]")


def _inputs(seed: int):
    return tuple(random_tensor(B, t, D_MHA, seed=seed + i) for i, t in enumerate((T_Q, T_K, T_K)))


@keeps_global_rng
def check_cpp_mha_init(cls) -> None:
    """w_q, w_k, w_v, w_o registered in that order as torch::nn::Linear(D, D); D % h != 0 is a ValueError."""
    module = built(MHA, cls, D_MHA, H)
    expected = [f"{name}.{part}" for name in LINEARS for part in ("weight", "bias")]
    found = list(module.state_dict())
    if sorted(found) != sorted(expected):
        core.load_weights(MHA, module, dict.fromkeys(expected, torch.zeros(())), "w_q, w_k, w_v, w_o")
    if found != expected:
        raise core.CheckFailure(
            f"{MHA}: register the projections in the order w_q, w_k, w_v, w_o; yours come as {found}."
        )
    for name in LINEARS:
        how = REGISTER.format(name=name) + " (a torch::nn::Linear(d_model, d_model))."
        layer = core.expect_attribute(MHA, module, name, nn.Linear, "a torch::nn::Linear", how)
        core.expect_shape(MHA, f"{name}.weight", layer.weight, "[D, D]", (D_MHA, D_MHA))
    try:
        cls(10, 3)
    except ValueError:
        pass
    except Exception as error:
        raise core.CheckFailure(
            f"{MHA}(10, 3) raised {type(error).__name__}: {error}; use "
            "TORCH_CHECK_VALUE(d_model % n_heads == 0, ...), which Python sees as a ValueError."
        ) from error
    else:
        raise core.CheckFailure(
            f"{MHA}(d_model=10, n_heads=3) should raise a ValueError: check d_model % n_heads == 0 in the "
            "constructor with TORCH_CHECK_VALUE(...)."
        )
    core.passed(f"{MHA} registers w_q, w_k, w_v, w_o as Linear(D, D) and rejects D % h != 0")


@keeps_global_rng
def check_cpp_mha_cross_attention(cls) -> None:
    """Cross-attention (T_q != T_k, key != value), no mask: equal to nn.MultiheadAttention."""
    torch_module, module = _mha_module(cls, seed=300)
    query, key, value = _inputs(seed=310)
    expected, weights = torch_expected(torch_module, query, key, value)
    compare_mha(module, H, query, key, value, None, expected, weights)
    inputs = {"query": query, "key": key, "value": value, "mask": None}
    output = answer(lambda: torch_expected(torch_module, query, key, value)[0])
    expect_mha_in_eval(cls, H, mha_state(torch_module), inputs, output)
    core.passed(
        f"{MHA} equals nn.MultiheadAttention for cross-attention, T_q={T_Q} != T_k={T_K}; "
        f"built with dropout = {EVAL_DROPOUT}, it drops nothing in eval mode"
    )


def mask_with_an_empty_row(seed: int) -> torch.Tensor:
    """``random_mask`` [B, 1, T_q, T_k], with the last query of the first item seeing no key."""
    mask = random_mask(B, T_Q, T_K, seed=seed)
    mask[0, 0, -1] = False
    return mask


@keeps_global_rng
def check_cpp_mha_mask(cls) -> None:
    """A mask [B, 1, T_q, T_k], True = may attend, one query with no key: zeros there, as lesson 03."""
    torch_module, module = _mha_module(cls, seed=400)
    query, key, value = _inputs(seed=410)
    mask = mask_with_an_empty_row(seed=411)
    expected, weights = torch_expected(torch_module, query, key, value, mask)
    # PyTorch's weights for the query that sees no key are NaN: the course's convention is zeros
    weights = weights.nan_to_num(0.0)
    expected = expected.clone()
    expected[0, -1] = torch_module.out_proj.bias.detach()
    compare_mha(module, H, query, key, value, mask, expected, weights)
    core.passed(f"{MHA} applies a mask [B, 1, T_q, T_k] (True = may attend); a query with no key gets zeros")


CATALOGUE = {EMBEDDING: EMBEDDING_MISTAKES, FEED_FORWARD: FEED_FORWARD_MISTAKES, MHA: MHA_MISTAKES}
