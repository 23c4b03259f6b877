"""Checks for lesson 11's blockwise_attention: attention that never builds the score matrix, and
memory as a count, the largest tensor an operation creates (autograder/checks/efficiency.py)."""

import math

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

from autograder.checks import core, shape_errors
from autograder.checks.answers import Expected
from autograder.checks.device import random_mask, random_tensor

# ---------------------------------------------------------------------------------------
# Memory as a count: the largest tensor an operation creates
# ---------------------------------------------------------------------------------------


class _Largest(TorchDispatchMode):
    """Sees every tensor operation run inside it (in this process) and keeps the shape of the
    largest new tensor one of them returns; views (a slice, a transpose, an expand) own no memory
    of their own and are left out."""

    def __init__(self) -> None:
        super().__init__()
        self.shape: tuple[int, ...] = ()
        self.numel = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for tensor in tree_leaves(out):
            if isinstance(tensor, torch.Tensor) and not tensor._is_view() and tensor.numel() > self.numel:
                self.shape, self.numel = tuple(tensor.shape), tensor.numel()
        return out


def largest_tensor(fn, *args, **kwargs) -> tuple[int, ...]:
    """The shape of the largest tensor that ``fn(*args, **kwargs)`` creates: a count, the same on
    every machine, and a lower bound of its peak memory (which it dominates for attention)."""
    with torch.no_grad(), _Largest() as seen:
        fn(*args, **kwargs)
    return seen.shape


# ---------------------------------------------------------------------------------------
# blockwise_attention
# ---------------------------------------------------------------------------------------

BLOCKWISE = "blockwise_attention"
BLOCKWISE_SIGNATURE = "blockwise_attention(q, k, v, mask=None, block_size=64)"
OUT = "[B, h, T_q, d_v]"
B_, H_, T_Q, T_K, D_K, D_V = 2, 3, 9, 23, 4, 6  # T_k = 23: blocks of 8 end with a shorter one of 7
BLOCK_SIZES = (8, 5, 1, 64)  # several blocks, a remainder of 3, one key per block, one block
FULL_SCORES = "the full score matrix built"
FULL_SCORES_HINT = (
    "Never compute q against all of k at once (q @ k.transpose(-2, -1), a softmax over all T_k keys, "
    "or lesson 03's scaled_dot_product_attention): take the keys and values one block at a time, "
    "k[..., start:end, :], and keep only the running maximum, sum and output between blocks."
)
OVERFLOW_SCALE = 600.0  # q scaled so that scores reach several hundred: exp overflows past 709.78


def blockwise_variant(
    q,
    k,
    v,
    mask=None,
    block_size=64,
    *,
    running_max=True,
    rescale="both",
    own_blocks=False,
    use_mask=True,
    fill=-math.inf,
    guard=True,
    last_block=True,
    scaled=True,
    last_key=True,
    mask_axis="key",
):
    """blockwise_attention with one thing done wrong, as a learner might write it: exp of the raw
    scores (``running_max``), the old sum or output not rescaled when the maximum grows
    (``rescale``: "sum" or "output" rescales only that one, "none" neither), each block's own softmax averaged
    (``own_blocks``), the mask left out or filled with -1e9, no guard for a row that has seen no
    allowed key (``guard``), the remainder block left out, the scores not divided by sqrt(d_k),
    each block ended at T_k - 1 at most (``last_key``), the mask sliced on its query axis, or on
    its key axis even where that axis has size 1 (``mask_axis="key, always"``)."""
    scale = 1.0 / math.sqrt(q.size(-1)) if scaled else 1.0
    t_k = k.size(-2)
    stop = t_k if last_block else t_k - t_k % block_size
    batch = torch.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    rows = (*batch, q.size(-2), 1)
    running = q.new_full(rows, -math.inf if running_max else 0.0)  # m: [..., T_q, 1]
    total = q.new_zeros(rows)  # l: [..., T_q, 1]
    acc = q.new_zeros((*batch, q.size(-2), v.size(-1)))  # [..., T_q, d_v]
    blocks = 0
    for start in range(0, stop, block_size):
        end = min(start + block_size, t_k if last_key else t_k - 1)
        scores = q @ k[..., start:end, :].transpose(-2, -1) * scale  # [..., T_q, b]
        if mask is not None and use_mask and mask_axis == "query":
            scores = scores.masked_fill(~mask[..., start:end, :], fill)
        elif mask is not None and use_mask:
            broadcasts = mask.size(-1) == 1 and mask_axis != "key, always"
            block_mask = mask if broadcasts else mask[..., start:end]
            scores = scores.masked_fill(~block_mask, fill)
        if own_blocks:  # each block's softmax, as if it were all the keys, then their mean
            acc = acc + torch.softmax(scores, dim=-1).nan_to_num(0.0) @ v[..., start:end, :]
            blocks += 1
            continue
        new = torch.maximum(running, scores.amax(dim=-1, keepdim=True)) if running_max else running
        shift = new.masked_fill(new == -math.inf, 0.0) if guard else new
        weights = torch.exp(scores - shift)  # [..., T_q, b]
        factor = torch.exp(running - shift)  # exp(m_old - m_new)
        total = total * (factor if rescale in ("both", "sum") else 1.0) + weights.sum(dim=-1, keepdim=True)
        acc = acc * (factor if rescale in ("both", "output") else 1.0) + weights @ v[..., start:end, :]
        running = new
    if own_blocks:
        return acc / max(blocks, 1)
    return acc / (total.masked_fill(total == 0, 1.0) if guard else total)


BLOCKWISE_MISTAKES = core.catalogue(BLOCKWISE, variant=blockwise_variant)


def blockwise_expected(q, k, v, mask=None) -> torch.Tensor:
    """softmax(q k^T / sqrt(d_k)) v over the whole score matrix: PyTorch's fused attention without
    a mask; with one, masked scores filled with -inf and a fully masked row's weights set to zero."""
    if mask is None:
        return torch.nn.functional.scaled_dot_product_attention(q, k, v)
    scores = (q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))).masked_fill(~mask, -math.inf)
    return torch.softmax(scores, dim=-1).masked_fill(~mask, 0.0) @ v


def _blockwise_inputs(seed: int, t_q=T_Q, t_k=T_K, scale=1.0):
    q = random_tensor(B_, H_, t_q, D_K, seed=seed, scale=scale)
    k = random_tensor(B_, H_, t_k, D_K, seed=seed + 1)
    v = random_tensor(B_, H_, t_k, D_V, seed=seed + 2)
    return q, k, v


def run_blockwise(fn, q, k, v, mask=None, block_size=64) -> torch.Tensor:
    """The learner's output, [..., T_q, d_v] (its inputs left as they were); a shape error names its
    sizes by the lesson's letters."""
    core.expect_parameter(BLOCKWISE, fn, "block_size", BLOCKWISE_SIGNATURE)
    letters = {"T_q": q.size(-2), "T_k": k.size(-2), "d_k": q.size(-1), "d_v": v.size(-1)}
    letters |= {"block_size": block_size} if block_size < k.size(-2) else {}
    inputs = {"q": q, "k": k, "v": v, "mask": mask, "block_size": block_size}
    with shape_errors.sizes(letters):
        return core.output(BLOCKWISE, fn, inputs)


def compare_blockwise(
    fn, q, k, v, mask=None, block_size=64, expected: Expected | None = None, where="", advice=""
) -> None:
    """The learner's output against ``expected()`` (default: ``blockwise_expected``), computed after
    the learner's call, a known mistake named by its output on the same inputs; ``where`` adds to
    what the inputs were, ``advice`` ends a message that names no mistake."""
    try:
        out = run_blockwise(fn, q, k, v, mask, block_size)
    except core.CheckFailure as failure:
        _name_mask_crash(fn, failure, q, k, v, mask, block_size)
        raise
    right = blockwise_expected(q, k, v, mask) if expected is None else expected()
    mistakes = core.mistake_outputs(BLOCKWISE_MISTAKES, q, k, v, mask, block_size)
    blocks = -(-k.size(-2) // block_size)
    plural = "s" if blocks > 1 else ""
    said = f" That was with block_size = {block_size} ({blocks} block{plural} of keys){where}."
    core.expect_close(BLOCKWISE, "the output", out, right, OUT, mistakes, said + advice)


def _runs(fn, q, k, v, mask, block_size: int) -> bool:
    """Whether the learner's call on these inputs returns without raising."""
    try:
        with torch.no_grad():
            core.call(BLOCKWISE, fn, q, k, v, mask, block_size)
    except core.CheckFailure:
        return False
    return True


def _name_mask_crash(fn, failure: core.CheckFailure, q, k, v, mask, block_size: int) -> None:
    """A shape error with a mask is the mask's slice: of a key axis of size 1 when the same mask
    widened to T_k keys runs, on the wrong axis when the call without a mask runs. Name it."""
    error = core.crash_of(failure)
    if mask is None or error is None or shape_errors.mismatched_sizes(error) is None:
        return
    widened = mask.expand(*mask.shape[:-1], k.size(-2))
    if mask.size(-1) == 1 and k.size(-2) > block_size and _runs(fn, q, k, v, widened, block_size):
        mistake, runs = core.named(BLOCKWISE_MISTAKES, "mask of key size 1 sliced per block"), "the same mask"
        runs += f" widened to {list(widened.shape)}"
    elif _runs(fn, q, k, v, None, block_size):
        mistake, runs = core.named(BLOCKWISE_MISTAKES, "mask sliced on the query axis"), "without one"
    else:
        return
    raise core.CheckFailure(
        f"{BLOCKWISE}: your code fails with a mask {list(mask.shape)} and runs {runs}, like a known "
        f"mistake, {mistake.said()}. {mistake.hint} (Your error: {error})"
    ) from error


def check_blockwise_shapes(fn) -> None:
    """out [B, h, T_q, d_v], in the inputs' dtype and on their device, for T_q != T_k and d_k != d_v."""
    q, k, v = _blockwise_inputs(seed=100)
    out = run_blockwise(fn, q, k, v, None, 8)
    core.expect_shape(BLOCKWISE, "the output", out, OUT, (B_, H_, T_Q, D_V))
    core.expect_dtype(BLOCKWISE, "the output", out, q.dtype)
    core.expect_device(BLOCKWISE, "the output", out, q.device)
    core.passed(
        f"{BLOCKWISE} returns out {OUT} = {[B_, H_, T_Q, D_V]} for T_q = {T_Q} != T_k = {T_K} "
        f"and d_k = {D_K} != d_v = {D_V}"
    )


def check_blockwise_values(fn) -> None:
    """Without a mask, block sizes 8, 5, 1 and 64 over T_k = 23 keys: equal to PyTorch's attention."""
    q, k, v = _blockwise_inputs(seed=110)
    advice = ""
    if core.same(run_blockwise(fn, q, k, v, None, T_K), blockwise_expected(q, k, v)):
        advice = (
            f" With one block of all T_k = {T_K} keys your output is right, so look at how blocks are "
            "combined: the old running sum and output multiplied by exp(m_old - m_new) when a block raises "
            "the maximum, and acc divided by the running sum once, after the last block."
        )
    for block_size in BLOCK_SIZES:
        compare_blockwise(fn, q, k, v, None, block_size, advice=advice)
    core.passed(
        f"{BLOCKWISE} equals torch's F.scaled_dot_product_attention for block_size = "
        f"{', '.join(map(str, BLOCK_SIZES))} over T_k = {T_K} keys (a last block shorter than the others)"
    )


def check_blockwise_large_scores(fn) -> None:
    """Scores of several hundred, where exp overflows even in float64: the running maximum keeps every
    exponent at most 0, so the output is still finite and right."""
    q, k, v = _blockwise_inputs(seed=120, scale=OVERFLOW_SCALE)
    largest = float((q @ k.transpose(-2, -1) / math.sqrt(D_K)).max())
    out = run_blockwise(fn, q, k, v, None, 8)
    if not torch.isfinite(out).all():
        mistake = core.named(BLOCKWISE_MISTAKES, "no running maximum")
        count = int((~torch.isfinite(out)).sum())
        raise core.CheckFailure(
            f"{BLOCKWISE}: with scores up to {largest:.0f}, {count} of {out.numel()} entries of the output "
            f"are NaN or infinite, and exp(710) already overflows in float64. "
            f"It looks like {mistake.said()}. {mistake.hint}"
        )
    compare_blockwise(fn, q, k, v, None, 8, where=f", scores up to {largest:.0f}")
    core.passed(f"{BLOCKWISE} stays finite and right with scores up to {largest:.0f} (exp(710) overflows)")


def _masks(q, k, seed: int) -> dict[str, torch.Tensor]:
    """Four broadcast shapes, True = may attend: [B, 1, T_q, T_k] with query 2 that may attend to no
    key, a padding mask [B, 1, 1, T_k] (the last row ends in 7 padded keys), a causal [T_q, T_k], and
    a mask of the queries [B, 1, T_q, 1] that broadcasts over every key (the last row's last two
    queries may attend to none)."""
    full = random_mask(q.size(0), q.size(-2), k.size(-2), seed=seed)
    full[:, :, 2, :] = False  # query 2 may attend to no key at all
    padding = torch.ones(q.size(0), 1, 1, k.size(-2), dtype=torch.bool, device=q.device)
    padding[-1, ..., -7:] = False
    causal = torch.ones(q.size(-2), k.size(-2), dtype=torch.bool, device=q.device).tril()
    queries = torch.ones(q.size(0), 1, q.size(-2), 1, dtype=torch.bool, device=q.device)
    queries[-1, :, -2:, :] = False
    return {
        "[B, 1, T_q, T_k]": full,
        "[B, 1, 1, T_k]": padding,
        "[T_q, T_k]": causal,
        "[B, 1, T_q, 1]": queries,
    }


def check_blockwise_mask(fn) -> None:
    """Masks of four broadcast shapes (True = may attend), one of key size 1, two with a query that
    may attend to no key: masked keys have no effect, and such a query's output is zeros, never NaN."""
    q, k, v = _blockwise_inputs(seed=130)
    for letters, mask in _masks(q, k, seed=131).items():
        compare_blockwise(fn, q, k, v, mask, 8, where=f", a mask {letters}")
    core.passed(
        f"{BLOCKWISE} applies masks [B, 1, T_q, T_k], [B, 1, 1, T_k], [T_q, T_k] and [B, 1, T_q, 1] (which "
        "broadcasts over the keys) block by block, and gives zeros, not NaN, for a query that may attend "
        "to no key"
    )


def check_blockwise_memory(fn, n: int = 256, block_size: int = 32) -> int:
    """Not a test cell (the judge could not see it): the largest tensor ``fn`` creates for T_q = T_k
    = n, B = 1, h = 2 must hold fewer numbers than the score matrix [B, h, T_q, T_k]. Returns how many
    numbers it holds."""
    q = random_tensor(1, 2, n, 16, seed=140)
    full = (1, 2, n, n)
    largest = math.prod(largest_tensor(core.call, BLOCKWISE, fn, q, q, q, None, block_size))
    if largest >= math.prod(full):
        raise core.CheckFailure(
            f"{BLOCKWISE}: for T_q = T_k = {n} and block_size = {block_size}, the largest tensor your code "
            f"creates holds {largest:,} numbers, as many as the whole score matrix [B, h, T_q, T_k] = "
            f"{list(full)}: {FULL_SCORES}. {FULL_SCORES_HINT}"
        )
    core.passed(
        f"{BLOCKWISE}: for T_q = T_k = {n} and block_size = {block_size}, the largest tensor it creates "
        f"holds {largest:,} numbers; the score matrix {list(full)} would hold {math.prod(full):,}"
    )
    return largest


CATALOGUE = {BLOCKWISE: BLOCKWISE_MISTAKES}
