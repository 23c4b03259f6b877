"""Checks for lesson 03: scaled_dot_product_attention(q, k, v, mask=None) -> (out, weights).

Oracles: torch.nn.functional.scaled_dot_product_attention for the output, and
softmax(q k^T / sqrt(d_k)) for the weights. Inputs: B=2, h=3, T_q=5 != T_k=7,
d_k=4 != d_v=6, and masks that are neither symmetric nor all True.
"""

import math

import torch
import torch.nn.functional as F

from autograder.checks import core, shape_errors
from autograder.checks.device import random_mask, random_tensor

EXERCISE = "scaled_dot_product_attention"
B, H, T_Q, T_K, D_K, D_V = 2, 3, 5, 7, 4, 6
OUT, WEIGHTS = "[B, h, T_q, d_v]", "[B, h, T_q, T_k]"


def _attend(scores: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None, fill: float, dim: int = -1):
    """softmax of the scores (masked with ``fill``) times v: the skeleton every mistake shares."""
    if mask is not None:
        scores = scores.masked_fill(~mask, fill)
    weights = torch.softmax(scores, dim=dim)
    return weights @ v, weights


def _scores(q, k, scale):
    return q @ k.transpose(-2, -1) / scale


def _zero_masked(out_weights, mask, v):
    """Zero the weights at masked keys (so a fully masked row gives 0, not NaN)."""
    _, weights = out_weights
    if mask is not None:
        weights = weights.masked_fill(~mask, 0.0)
    return weights @ v, weights


MISTAKES = core.catalogue(
    EXERCISE,
    {
        "no scaling": lambda q, k, v, mask=None: _zero_masked(
            _attend(_scores(q, k, 1.0), v, mask, -math.inf), mask, v
        ),
        "scaled by d_k instead of sqrt(d_k)": lambda q, k, v, mask=None: _zero_masked(
            _attend(_scores(q, k, q.size(-1)), v, mask, -math.inf), mask, v
        ),
        "scaled by sqrt(d_v)": lambda q, k, v, mask=None: _zero_masked(
            _attend(_scores(q, k, math.sqrt(v.size(-1))), v, mask, -math.inf), mask, v
        ),
        "softmax over the wrong dimension": lambda q, k, v, mask=None: _zero_masked(
            _attend(_scores(q, k, math.sqrt(q.size(-1))), v, mask, -math.inf, dim=-2), mask, v
        ),
        "inverted mask": lambda q, k, v, mask=None: _zero_masked(
            _attend(_scores(q, k, math.sqrt(q.size(-1))), v, None if mask is None else ~mask, -math.inf),
            None if mask is None else ~mask,
            v,
        ),
        "mask ignored": lambda q, k, v, mask=None: _attend(
            _scores(q, k, math.sqrt(q.size(-1))), v, None, -math.inf
        ),
        "masked scores set to 0": lambda q, k, v, mask=None: _attend(
            _scores(q, k, math.sqrt(q.size(-1))), v, mask, 0.0
        ),
        "NaN on a fully masked row": lambda q, k, v, mask=None: _attend(
            _scores(q, k, math.sqrt(q.size(-1))), v, mask, -math.inf
        ),
        "-1e9 leaves a fully masked row uniform": lambda q, k, v, mask=None: _attend(
            _scores(q, k, math.sqrt(q.size(-1))), v, mask, -1e9
        ),
        "k reshaped instead of transposed": lambda q, k, v, mask=None: _zero_masked(
            _attend(
                q @ k.reshape(*k.shape[:-2], k.size(-1), k.size(-2)) / math.sqrt(q.size(-1)),
                v,
                mask,
                -math.inf,
            ),
            mask,
            v,
        ),
    },
)


def _inputs(seed: int):
    q = random_tensor(B, H, T_Q, D_K, seed=seed)
    k = random_tensor(B, H, T_K, D_K, seed=seed + 1)
    v = random_tensor(B, H, T_K, D_V, seed=seed + 2)
    return q, k, v


def expected_attention(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
    if mask is not None:
        scores = scores.masked_fill(~mask, -math.inf)
    weights = torch.softmax(scores, dim=-1)
    if mask is not None:
        weights = weights.masked_fill(~mask, 0.0)
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    return out, weights


# what it likely means when two of these sizes meet in a shape error
CAUSES = {
    ("d_k", "T_k"): "k's last two axes are taken in the wrong order: the scores are "
    "q @ k.transpose(-2, -1) (in einsum, '...qd,...kd->...qk'), [..., T_q, d_k] @ [..., d_k, T_k] "
    "= [..., T_q, T_k]",
    ("T_q", "T_k"): "the scores or the weights are transposed: q kᵀ has one row per query, "
    "[..., T_q, T_k], and out = weights @ v multiplies its T_k columns with v's T_k rows",
}


def _run(fn, q, k, v, mask=None):
    """Call the learner's function, check it returned (out, weights) and left its inputs alone;
    a shape error names its sizes by the lesson's letters."""
    inputs = {"q": q, "k": k, "v": v} | ({} if mask is None else {"mask": mask})
    letters = {"T_q": q.size(-2), "d_k": q.size(-1), "T_k": k.size(-2), "d_v": v.size(-1)}
    if q.dim() == 4:
        letters |= {"B": q.size(0), "h": q.size(1)}
    with core.unchanged(EXERCISE, **inputs), shape_errors.sizes(letters, CAUSES):
        result = core.call(EXERCISE, fn, q, k, v, mask)
    if not (isinstance(result, tuple) and len(result) == 2):
        raise core.CheckFailure(
            f"{EXERCISE}: expected a pair (out, weights), got {type(result).__name__}"
            + (f" of length {len(result)}" if isinstance(result, tuple) else "")
        )
    return result


def compare(fn, q, k, v, mask=None, oracle=None) -> None:
    """Compare the learner's (out, weights) with what ``oracle(q, k, v, mask)`` gives (default: the
    PyTorch oracle), computed only once the learner's code has returned: while it runs, no expected
    value is anywhere it could read one (a caller's frame, a global), to keep for a later call."""
    out, weights = _run(fn, q, k, v, mask)
    expected_out, expected_weights = (oracle or expected_attention)(q, k, v, mask)
    wrong = core.mistake_outputs(MISTAKES, q, k, v, mask)
    pairs = [(m, output) for m, output in wrong if isinstance(output, tuple)]  # not the crashes
    weights_of = [(m, w) for m, (_, w) in pairs]
    core.expect_close(EXERCISE, "weights", weights, expected_weights, WEIGHTS, weights_of)
    right = " Your weights are right, so look at how they are applied to v: out = weights @ v."
    core.expect_close(EXERCISE, "out", out, expected_out, OUT, [(m, o) for m, (o, _) in pairs], right)


def check_attention_shapes(fn) -> None:
    """out [B, h, T_q, d_v] and weights [B, h, T_q, T_k], float64 on the inputs' device."""
    q, k, v = _inputs(seed=0)
    out, weights = _run(fn, q, k, v)
    for what, tensor, letters, shape in (
        ("out", out, OUT, (B, H, T_Q, D_V)),
        ("weights", weights, WEIGHTS, (B, H, T_Q, T_K)),
    ):
        core.expect_tensor(EXERCISE, what, tensor)
        core.expect_shape(EXERCISE, what, tensor, letters, shape)
        core.expect_dtype(EXERCISE, what, tensor, q.dtype)
        core.expect_device(EXERCISE, what, tensor, q.device)
    core.passed(f"{EXERCISE} returns out {OUT} and weights {WEIGHTS} for T_q={T_Q} != T_k={T_K}, d_k != d_v")


def check_attention_values(fn) -> None:
    """Without a mask: equal to PyTorch's scaled_dot_product_attention; weights' rows sum to 1."""
    q, k, v = _inputs(seed=10)
    compare(fn, q, k, v)
    _, weights = _run(fn, q, k, v)
    sums = weights.sum(dim=-1)
    if not torch.allclose(sums, torch.ones_like(sums)):
        raise core.CheckFailure(
            f"{EXERCISE}: each row of weights must sum to 1, got sums {sums.flatten()[:4]}"
        )
    core.passed(
        f"{EXERCISE} equals torch's F.scaled_dot_product_attention, and each row of weights sums to 1"
    )


def check_attention_mask(fn) -> None:
    """With a boolean mask [B, 1, T_q, T_k]: masked keys get zero weight and cannot move the output."""
    q, k, v = _inputs(seed=20)
    mask = random_mask(B, T_Q, T_K, seed=21)
    compare(fn, q, k, v, mask)
    moved = v.clone()
    moved[..., -1, :] += 100.0  # the last key is masked for every query
    out, _ = _run(fn, q, k, v, mask)
    out_moved, _ = _run(fn, q, k, moved, mask)
    if not torch.allclose(out, out_moved):
        raise core.CheckFailure(f"{EXERCISE}: changing the value of a masked key changed the output")
    core.passed(f"{EXERCISE} applies a mask [B, 1, T_q, T_k] (True = may attend); masked keys have no effect")


def check_attention_fully_masked(fn) -> None:
    """A query whose keys are all masked gets zero weights and a zero output, never NaN."""
    q, k, v = _inputs(seed=30)
    mask = random_mask(B, T_Q, T_K, seed=31)
    mask[:, :, 2, :] = False  # query 2 may attend to nothing
    compare(fn, q, k, v, mask)
    core.passed(f"{EXERCISE} gives zeros, not NaN, for a query whose keys are all masked")


CATALOGUE = {EXERCISE: MISTAKES}
