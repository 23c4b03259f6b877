"""Checks for lesson 05: split_heads, merge_heads and MultiHeadAttention.

Oracles: a formula for the head split (``torch.stack(x.chunk(h, -1), 1)``: head i
holds the i-th block of d_k features) and for the merge (``torch.cat`` of the
heads along the features), and ``nn.MultiheadAttention(batch_first=True)`` with
its weights copied into the learner's module (``in_proj_weight`` split into
w_q, w_k, w_v; ``out_proj`` is w_o). Inputs: B=2, h=3, d_k=4, D=12, T=T_q=5,
T_k=7, so that no two of the axes have the same length and a swapped axis
shows; cross-attention (query, key and value all different) and masks that are
neither all True nor the same for every query.
"""

import contextlib
import functools
import math
from collections.abc import Callable, Iterator
from types import SimpleNamespace

import torch
from torch import nn

from autograder.checks import core, shape_errors
from autograder.checks.answers import Expected, answer
from autograder.checks.device import exact_matmul, random_mask, random_tensor
from autograder.checks.eval_mode import (
    DROPOUT_ON_OUTPUT,
    EVAL_DROPOUT,
    NO_DROPOUT_IN_TRAINING,
    dropped,
    expect_dropout_in_training,
    expect_dropout_off_in_eval,
    expect_same_on_second_call,
)
from autograder.checks.oracles import mha_state, torch_mha

B, H, D_K, T_Q, T_K = 2, 3, 4, 5, 7
D = H * D_K
T = T_Q
SPLIT, MERGED = "[B, h, T, d_k]", "[B, T, D]"
MHA_OUT, MHA_ATTN = "[B, T_q, D]", "[B, h, T_q, T_k]"
LINEARS = ("w_q", "w_k", "w_v", "w_o")
SPLIT_HEADS, MERGE_HEADS, MHA = "split_heads", "merge_heads", "MultiHeadAttention"


def keeps_global_rng(check: Callable) -> Callable:
    """Run ``check`` without moving torch's global random state: building modules draws from it,
    and the lesson's later cells (figures, experiments) should not depend on how often a
    check ran."""

    @functools.wraps(check)
    def wrapper(*args, **kwargs):
        with torch.random.fork_rng(devices=[]):
            return check(*args, **kwargs)

    return wrapper


# ----------------------------------------------------------------------------- split_heads


def _split_blocks(x: torch.Tensor, n_heads: int) -> torch.Tensor:
    """The oracle: head i gets features i*d_k ... (i+1)*d_k - 1 of every position."""
    return torch.stack(x.chunk(n_heads, dim=-1), dim=1)


SPLIT_MISTAKES = core.catalogue(
    SPLIT_HEADS,
    {
        "view straight to [B, h, T, d_k]": lambda x, n_heads: x.reshape(
            x.size(0), n_heads, x.size(1), x.size(2) // n_heads
        ),
        "no transpose after the view": lambda x, n_heads: x.reshape(
            x.size(0), x.size(1), n_heads, x.size(2) // n_heads
        ),
        "transposed the last two axes": lambda x, n_heads: x.reshape(
            x.size(0), x.size(1), n_heads, x.size(2) // n_heads
        ).transpose(-2, -1),
        "heads take every h-th feature": lambda x, n_heads: x.reshape(
            x.size(0), x.size(1), x.size(2) // n_heads, n_heads
        ).permute(0, 3, 1, 2),
    },
)


def compare_split(fn, x: torch.Tensor, n_heads: int, expected: Expected | None = None) -> None:
    """Compare split_heads(x, n_heads) with ``expected()`` (default: the block formula), computed
    after the learner's call."""
    out = core.output(SPLIT_HEADS, fn, {"x": x, "n_heads": n_heads})
    wrong = core.mistake_outputs(SPLIT_MISTAKES, x, n_heads)
    right = _split_blocks(x, n_heads) if expected is None else expected()
    core.expect_close(SPLIT_HEADS, "the output", out, right, SPLIT, wrong)
    core.expect_dtype(SPLIT_HEADS, "the output", out, x.dtype)
    core.expect_device(SPLIT_HEADS, "the output", out, x.device)


def check_split_heads(fn) -> None:
    """[B, T, D] -> [B, h, T, d_k], head i holding the i-th block of d_k features."""
    x = random_tensor(B, T, D, seed=100)
    compare_split(fn, x, H)
    core.passed(f"{SPLIT_HEADS} turns [B, T, D] = {[B, T, D]} into {SPLIT} = {[B, H, T, D_K]}, head by head")


def check_split_heads_blocks(fn) -> None:
    """Changing feature j of one position changes only head j // d_k at that position."""
    x = random_tensor(B, T, D, seed=110)
    before = core.call(SPLIT_HEADS, fn, x, H)
    core.expect_tensor(SPLIT_HEADS, "the output", before)
    core.expect_shape(SPLIT_HEADS, "the output", before, SPLIT, (B, H, T, D_K))
    for feature in (0, D_K + 1, D - 1):
        moved = x.clone()
        moved[1, 3, feature] += 10.0
        changed = (core.call(SPLIT_HEADS, fn, moved, H) != before).nonzero().tolist()
        head, position = feature // D_K, 3
        if changed != [[1, head, position, feature % D_K]]:
            raise core.CheckFailure(
                f"{SPLIT_HEADS}: changing feature {feature} of position {position} (batch 1) should "
                f"change only out[1, {head}, {position}, {feature % D_K}] (head {feature} // d_k = "
                f"{head}), but it changed {changed[:4]}."
            )
    core.passed(f"{SPLIT_HEADS} gives feature j of a position to head j // d_k, at the same position")


# ----------------------------------------------------------------------------- merge_heads


def _merge_blocks(x: torch.Tensor) -> torch.Tensor:
    """The oracle: the heads' d_k features side by side, head 0 first."""
    return torch.cat(x.unbind(dim=1), dim=-1)


MERGE_MISTAKES = core.catalogue(
    MERGE_HEADS,
    {
        "view without transposing back": lambda x: x.reshape(x.size(0), x.size(2), x.size(1) * x.size(3)),
        "transposed but not flattened": lambda x: x.transpose(1, 2),
        "heads interleaved": lambda x: x.permute(0, 2, 3, 1).reshape(
            x.size(0), x.size(2), x.size(1) * x.size(3)
        ),
    },
)


def compare_merge(fn, x: torch.Tensor, expected: Expected | None = None) -> None:
    """Compare merge_heads(x) with ``expected()`` (default: the concatenation formula), computed
    after the learner's call."""
    out = core.output(MERGE_HEADS, fn, {"x": x})
    wrong = core.mistake_outputs(MERGE_MISTAKES, x)
    right = _merge_blocks(x) if expected is None else expected()
    core.expect_close(MERGE_HEADS, "the output", out, right, MERGED, wrong)
    core.expect_dtype(MERGE_HEADS, "the output", out, x.dtype)
    core.expect_device(MERGE_HEADS, "the output", out, x.device)


def check_merge_heads(fn) -> None:
    """[B, h, T, d_k] -> [B, T, D], on a contiguous input (as attention's output is)."""
    x = random_tensor(B, H, T, D_K, seed=200)
    compare_merge(fn, x)
    core.passed(f"{MERGE_HEADS} turns {SPLIT} = {[B, H, T, D_K]} into [B, T, D] = {[B, T, D]}")


def check_merge_heads_round_trip(fn) -> None:
    """merge_heads undoes the split: merge_heads(split(x)) == x, and the split of a merge too."""
    x = random_tensor(B, T, D, seed=210)
    back = core.call(MERGE_HEADS, fn, _split_blocks(x, H))
    core.expect_close(MERGE_HEADS, "merge_heads(split_heads(x))", back, x, MERGED, [])
    heads = random_tensor(B, H, T, D_K, seed=211)
    again = _split_blocks(core.call(MERGE_HEADS, fn, heads), H)
    core.expect_close(MERGE_HEADS, "split_heads(merge_heads(x))", again, heads, SPLIT, [])
    core.passed(f"{MERGE_HEADS} is the inverse of split_heads, in both directions")


# ----------------------------------------------------------------------------- MultiHeadAttention


def _heads(x: torch.Tensor, n_heads: int) -> torch.Tensor:
    return x.reshape(x.size(0), x.size(1), n_heads, x.size(2) // n_heads).transpose(1, 2)


def _merge(x: torch.Tensor) -> torch.Tensor:
    return x.transpose(1, 2).reshape(x.size(0), x.size(2), x.size(1) * x.size(3))


def _attention(q, k, v, mask, scale, drop=None):
    """softmax(q kᵀ / scale) v, masked with -inf, a fully masked row giving zeros; ``drop``, when
    given, applied to the weights before they weigh v."""
    scores = q @ k.transpose(-2, -1) / scale
    if mask is not None:
        scores = scores.masked_fill(~mask, -math.inf)
    weights = torch.softmax(scores, dim=-1)
    if mask is not None:
        weights = weights.masked_fill(~mask, 0.0)
    if drop is not None:
        weights = drop(weights)
    return weights @ v, weights


def _mha(
    module,
    query,
    key,
    value,
    mask=None,
    *,
    proj=None,
    key_from=None,
    value_from=None,
    scale=None,
    split=_heads,
    merge=_merge,
    out=True,
    use_mask=True,
    eval_dropout=False,
    train_dropout="weights",
):
    """The multi-head computation with one thing changed: the skeleton every mistake shares.
    In train mode the attention weights are dropped (``train_dropout`` "weights"), or nothing
    ("none"), or the output ("output")."""
    h = module.n_heads
    w_q, w_k, w_v = proj or (module.w_q, module.w_k, module.w_v)
    q = split(w_q(query), h)
    k = split(w_k(key if key_from is None else key_from), h)
    v = split(w_v(value if value_from is None else value_from), h)
    scale = math.sqrt(q.size(-1)) if scale is None else scale
    training = getattr(module, "training", False)  # a stand-in holding only the linears drops nothing
    drop_weights = eval_dropout or (training and train_dropout == "weights")
    drop = functools.partial(dropped, module) if drop_weights else None
    heads, _ = _attention(q, k, v, mask if use_mask else None, scale, drop)
    merged = merge(heads)
    result = module.w_o(merged) if out else merged
    return dropped(module, result) if training and train_dropout == "output" else result


def _split_without_transpose(x, n_heads):
    return x.reshape(x.size(0), n_heads, x.size(1), x.size(2) // n_heads)


def _merge_without_transpose(x):
    return x.reshape(x.size(0), x.size(2), x.size(1) * x.size(3))


def _view_only(x, n_heads):
    """[B, T, D] -> [B, T, h, d_k], left there: attention then runs over the heads at each position."""
    return x.reshape(x.size(0), x.size(1), n_heads, x.size(2) // n_heads)


def _flatten_heads(x):
    """[B, T, h, d_k] -> [B, T, D], the merge that goes with ``_view_only``."""
    return x.reshape(x.size(0), x.size(1), x.size(2) * x.size(3))


MHA_MISTAKES = core.catalogue(
    MHA,
    {
        "no output projection": lambda m, query, key, value, mask=None: _mha(
            m, query, key, value, mask, out=False
        ),
        "one projection for q, k and v": lambda m, query, key, value, mask=None: _mha(
            m, query, key, value, mask, proj=(m.w_q,) * 3
        ),
        "key projected with w_q": lambda m, query, key, value, mask=None: _mha(
            m, query, key, value, mask, proj=(m.w_q, m.w_q, m.w_v)
        ),
        "value projected from the key input": lambda m, query, key, value, mask=None: _mha(
            m, query, key, value, mask, value_from=key
        ),
        "keys and values swapped": lambda m, query, key, value, mask=None: _mha(
            m, query, key, value, mask, key_from=value, value_from=key
        ),
        "heads split without transpose": lambda m, query, key, value, mask=None: _mha(
            m, query, key, value, mask, split=_split_without_transpose
        ),
        "heads merged without transpose": lambda m, query, key, value, mask=None: _mha(
            m, query, key, value, mask, merge=_merge_without_transpose
        ),
        "q, k and v left as [B, T, h, d_k] (no transpose)": lambda m, query, key, value, mask=None: _mha(
            m, query, key, value, mask, split=_view_only, merge=_flatten_heads
        ),
        "scaled by sqrt(D) instead of sqrt(d_k)": lambda m, query, key, value, mask=None: _mha(
            m, query, key, value, mask, scale=math.sqrt(query.size(-1))
        ),
        "mask ignored": lambda m, query, key, value, mask=None: _mha(
            m, query, key, value, mask, use_mask=False
        ),
        "dropout also in eval mode": lambda m, query, key, value, mask=None: _mha(
            m, query, key, value, mask, eval_dropout=True
        ),
        NO_DROPOUT_IN_TRAINING: lambda m, query, key, value, mask=None: _mha(
            m, query, key, value, mask, train_dropout="none"
        ),
        DROPOUT_ON_OUTPUT: lambda m, query, key, value, mask=None: _mha(
            m, query, key, value, mask, train_dropout="output"
        ),
    },
)


@contextlib.contextmanager
def _no_grad_exact() -> Iterator[None]:
    with torch.no_grad(), exact_matmul():
        yield


def torch_expected(torch_module, query, key, value, mask=None):
    """(out [B, T_q, D], weights [B, h, T_q, T_k]) from PyTorch, whose boolean attn_mask is
    True where attending is NOT allowed, of shape [T_q, T_k] or [B * h, T_q, T_k]."""
    attn_mask = None
    if mask is not None:
        b, h, t_q, t_k = query.size(0), torch_module.num_heads, query.size(1), key.size(1)
        attn_mask = (~mask).expand(b, h, t_q, t_k).reshape(b * h, t_q, t_k)
    with _no_grad_exact():
        return torch_module(
            query, key, value, attn_mask=attn_mask, need_weights=True, average_attn_weights=False
        )


def stand_in(module, n_heads: int):
    """The learner's projections with the number of heads, for computing the mistakes."""
    return SimpleNamespace(n_heads=n_heads, **{name: getattr(module, name) for name in LINEARS})


# what it likely means when two of these sizes meet in a shape error inside MultiHeadAttention
HEADS_FIRST = (
    "attention works on [B, h, T, d_k] tensors: split q, k and v with view(B, T, h, d_k) and then "
    "transpose(1, 2), so that the scores q kᵀ are [B, h, T_q, T_k] and the mask [B, 1, T_q, T_k] fits them"
)
MHA_CAUSES = {("T_q", "T_k"): HEADS_FIRST, ("h", "T_k"): HEADS_FIRST, ("h", "T_q"): HEADS_FIRST}


def output_of(module, query, key, value, mask=None, n_heads=H, exercise=MHA):
    """The learner's output; a shape error names its sizes by the lesson's letters (``exercise``
    names lesson 12's C++ module too)."""
    letters = {"B": query.size(0), "h": n_heads, "T_q": query.size(1), "T_k": key.size(1), "D": query.size(2)}
    with shape_errors.sizes(letters | {"d_k": query.size(2) // n_heads}, MHA_CAUSES):
        return core.output(exercise, module, {"query": query, "key": key, "value": value, "mask": mask})


def _forward_named(module, n_heads, query, key, value, mask):
    """``output_of``; when it crashes, the learner's module runs again on inputs where the known
    mistakes that crash here do not (T_k = T_q, no mask), and a mistake that its output matches
    there is named."""
    try:
        return output_of(module, query, key, value, mask, n_heads)
    except core.CheckFailure as failure:
        crash = core.crash_of(failure)
        if crash is None:
            raise
        length = min(query.size(1), key.size(1))
        square = (query[:, :length], key[:, :length], value[:, :length])
        try:
            with torch.no_grad(), exact_matmul():
                out = module(*square, None)
        except Exception:  # noqa: BLE001 - any crash here: the first failure stands
            raise failure from crash
        for mistake, wrong in core.mistake_outputs(MHA_MISTAKES, stand_in(module, n_heads), *square, None):
            if isinstance(wrong, torch.Tensor) and isinstance(out, torch.Tensor) and core.same(out, wrong):
                raise core.CheckFailure(
                    f"{MHA} raised {type(crash).__name__} for T_q = {query.size(1)}, T_k = {key.size(1)}"
                    f"{' and a mask' if mask is not None else ''}; with T_q == T_k = {length} and no mask "
                    f"it runs, and its output matches a known mistake, {mistake.said()}. {mistake.hint}"
                ) from crash
        raise


def compare_mha(module, n_heads, query, key, value, mask, expected: Expected, keeps_attn=False):
    """The learner's output against the expected output (naming a known mistake), and, with
    ``keeps_attn``, the weights it keeps in ``self.attn`` against the expected weights: the pair
    ``expected()`` computes after the learner's call."""
    out = _forward_named(module, n_heads, query, key, value, mask)
    wrong = core.mistake_outputs(MHA_MISTAKES, stand_in(module, n_heads), query, key, value, mask)
    attn = getattr(module, "attn", None)
    expected_out, expected_attn = expected()
    where = (
        " Your self.attn weights are right, so look at what comes after them: weights @ v in each "
        "head, merging the heads, or w_o."
        if isinstance(attn, torch.Tensor) and core.same(attn, expected_attn)
        else ""
    )
    core.expect_close(MHA, "the output", out, expected_out, MHA_OUT, wrong, where)
    core.expect_dtype(MHA, "the output", out, query.dtype)
    core.expect_device(MHA, "the output", out, query.device)
    if not keeps_attn:
        return
    if not isinstance(attn, torch.Tensor):
        raise core.CheckFailure(
            f"{MHA}: self.attn should hold the last attention weights {MHA_ATTN}, got "
            f"{type(attn).__name__}; keep the weights that scaled_dot_product_attention returns: "
            "out, self.attn = scaled_dot_product_attention(q, k, v, mask)."
        )
    expect_not_averaged(
        MHA, attn, expected_attn, "self.attn", "keep the weights scaled_dot_product_attention returns"
    )
    core.expect_close(MHA, "self.attn", attn, expected_attn, MHA_ATTN)


def expect_not_averaged(
    exercise: str, attn: torch.Tensor, expected: torch.Tensor, name: str, how: str
) -> None:
    """``attn`` [B, T_q, T_k] equal to the expected weights [B, h, T_q, T_k] averaged over the heads
    (nn.MultiheadAttention's default, average_attn_weights=True) is told so."""
    averaged = expected.mean(dim=1)
    if attn.shape == averaged.shape and core.same(attn, averaged):
        raise core.CheckFailure(
            f"{exercise}: {name} is [B, T_q, T_k], the weights averaged over the h heads (what "
            f"nn.MultiheadAttention returns by default); keep one map per head, {MHA_ATTN}: {how}, "
            "not their mean."
        )


def expect_steady(module, cls, n_heads: int, state: dict, inputs: tuple, expected: Expected) -> None:
    """``module`` (the learner's, dropout 0, ``state`` loaded), whose output on ``inputs`` (query,
    key, value, mask) was right, called twice more, and the learner's module built with dropout =
    EVAL_DROPOUT, in eval mode, with ``state`` loaded, twice: every output is ``expected()``'s, dropout
    0's (computed after the learner's calls); then in train mode once, where it must drop attention
    weights (neither nothing nor entries of the output)."""

    def expected_out() -> torch.Tensor:  # the output, without the weights
        return expected()[0]

    expect_same_on_second_call(MHA, functools.partial(output_of, module, *inputs, n_heads), expected_out)
    core.expect_parameter(MHA, cls, "dropout", "MultiHeadAttention(d_model, n_heads, dropout=0.0)")
    dropping = core.build(MHA, cls, inputs[0].size(-1), n_heads, dropout=EVAL_DROPOUT)
    core.load_weights(MHA, dropping, state)
    run = functools.partial(output_of, dropping, *inputs, n_heads)
    expect_dropout_off_in_eval(MHA, MHA_MISTAKES, run, expected_out, MHA_OUT)
    device = inputs[0].device
    with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):
        dropping.train()
        expect_dropout_in_training(MHA, MHA_MISTAKES, run, expected_out, EVAL_DROPOUT)


def _inputs(seed: int):
    query = random_tensor(B, T_Q, D, seed=seed)
    key = random_tensor(B, T_K, D, seed=seed + 1)
    value = random_tensor(B, T_K, D, seed=seed + 2)
    return query, key, value


def _against_torch(cls, seed: int):
    """nn.MultiheadAttention (seeded with ``seed``), its weights, and the learner's module built
    with them: (torch's module, the weights, the learner's module)."""
    torch_module = torch_mha(D, H, seed=seed)
    state = mha_state(torch_module)
    module = core.build(MHA, cls, D, H)
    core.load_weights(MHA, module, state)
    return torch_module, state, module


@keeps_global_rng
def check_mha_init(cls) -> None:
    """w_q, w_k, w_v, w_o: nn.Linear(D, D) with bias, in that order; 4·D² + 4·D parameters;
    D % h != 0 is a ValueError."""
    module = core.build(MHA, cls, D, H)
    expected = [f"{name}.{part}" for name in LINEARS for part in ("weight", "bias")]
    found = list(module.state_dict())
    missing = [name for name in expected if name not in found]
    if missing and all(name.endswith(".bias") for name in missing):
        raise core.CheckFailure(
            f"{MHA}: the projections have no bias (missing {missing}); the lesson's projections are "
            "nn.Linear(d_model, d_model) with a bias, PyTorch's default: leave out bias=False."
        )
    if sorted(found) != sorted(expected):
        core.load_weights(MHA, module, dict.fromkeys(expected, torch.zeros(())))  # names what is missing
    if found != expected:
        raise core.CheckFailure(
            f"{MHA}: create the projections in the order w_q, w_k, w_v, w_o (so weights load in "
            f"the contract's order); your parameters come in the order {found}."
        )
    for name in LINEARS:
        layer = getattr(module, name)
        if not isinstance(layer, nn.Linear) or layer.weight.shape != (D, D) or layer.bias is None:
            raise core.CheckFailure(
                f"{MHA}: self.{name} should be nn.Linear(d_model, d_model) with a bias, "
                f"weight [D, D] = {[D, D]}; got {layer}."
            )
    count = sum(p.numel() for p in module.parameters())
    if count != 4 * D * D + 4 * D:
        raise core.CheckFailure(
            f"{MHA}: expected 4·D² + 4·D = {4 * D * D + 4 * D} parameters for D = {D}, got {count}."
        )
    try:
        cls(10, 3)
    except ValueError:
        pass
    except Exception as error:
        raise core.CheckFailure(
            f"{MHA}(d_model=10, n_heads=3) raised {type(error).__name__}: {error}; raise a "
            "ValueError that says d_model must be divisible by n_heads."
        ) from error
    else:
        raise core.CheckFailure(
            f"{MHA}(d_model=10, n_heads=3) should raise a ValueError: 10 is not divisible by 3, "
            "so the heads cannot share d_model equally. Check d_model % n_heads in __init__."
        )
    core.passed(
        f"{MHA} has w_q, w_k, w_v, w_o = nn.Linear(D, D), 4·D² + 4·D = {count} parameters for "
        f"D = {D}, and rejects D % h != 0"
    )


@keeps_global_rng
def check_mha_cross_attention(cls) -> None:
    """Cross-attention (T_q != T_k, key != value), no mask: equal to nn.MultiheadAttention."""
    torch_module, state, module = _against_torch(cls, seed=300)
    query, key, value = _inputs(seed=310)
    expected = answer(torch_expected, torch_module, query, key, value)
    compare_mha(module, H, query, key, value, None, expected)
    expect_steady(module, cls, H, state, (query, key, value, None), expected)
    core.passed(
        f"{MHA} equals nn.MultiheadAttention for cross-attention: query [B, T_q, D], key and value "
        f"[B, T_k, D], T_q={T_Q} != T_k={T_K}, output {MHA_OUT}; built with dropout = {EVAL_DROPOUT}, "
        "it drops nothing in eval mode, and a second call gives the same"
    )


@keeps_global_rng
def check_mha_mask(cls) -> None:
    """A boolean mask [B, 1, T_q, T_k] (True = may attend) broadcast over the heads; a masked key
    cannot move the output."""
    torch_module, state, module = _against_torch(cls, seed=400)
    query, key, value = _inputs(seed=410)
    mask = random_mask(B, T_Q, T_K, seed=411)
    expected = answer(torch_expected, torch_module, query, key, value, mask)
    compare_mha(module, H, query, key, value, mask, expected)
    moved_key, moved_value = key.clone(), value.clone()
    moved_key[:, -1] += 100.0  # the last key is masked for every query
    moved_value[:, -1] -= 100.0
    out = output_of(module, query, key, value, mask)
    if not torch.allclose(out, output_of(module, query, moved_key, moved_value, mask)):
        raise core.CheckFailure(f"{MHA}: changing the key and value of a masked position changed the output")
    core.passed(
        f"{MHA} applies a mask [B, 1, T_q, T_k] (True = may attend) to every head; masked keys have no effect"
    )


@keeps_global_rng
def check_mha_attn(cls) -> None:
    """self.attn keeps the last weights [B, h, T_q, T_k], one map per head (not averaged)."""
    torch_module, state, module = _against_torch(cls, seed=500)
    query, key, value = _inputs(seed=510)
    mask = random_mask(B, T_Q, T_K, seed=511)
    expected = answer(torch_expected, torch_module, query, key, value, mask)
    compare_mha(module, H, query, key, value, mask, expected, keeps_attn=True)
    core.passed(
        f"{MHA} keeps self.attn {MHA_ATTN} = {[B, H, T_Q, T_K]}, equal to nn.MultiheadAttention's "
        "weights with average_attn_weights=False"
    )


CATALOGUE = {SPLIT_HEADS: SPLIT_MISTAKES, MERGE_HEADS: MERGE_MISTAKES, MHA: MHA_MISTAKES}
