"""Checks for lesson 10's make_batch, sequence_loss, rate and exact_match (train_step: train_step.py).

Oracles: ``pad_sequence`` and lesson 04's masks in PyTorch's conventions (masking.py) for
make_batch; ``F.cross_entropy(..., ignore_index=pad_id, label_smoothing=...)`` for
sequence_loss; the paper's formula (section 5.3) for rate; lists cut at their first end token
for exact_match. The inputs are chosen so that every known mistake gives its own output:
rows of different lengths (so S != T and the padding shows), pad_id = 0 and then pad_id = 3
with 0 an ordinary token, rates during the warm-up, at its end and after it for two d_model
and two factors, and decodings both wider and narrower than the target.
"""

import copy
import math

import torch
import torch.nn.functional as F
from torch.nn.utils.rnn import pad_sequence

from autograder.checks import core, masking, oracles
from autograder.checks.answers import Expected
from autograder.checks.device import DEVICE, random_tensor

MAKE_BATCH, LOSS, RATE, EXACT = "make_batch", "sequence_loss", "rate", "exact_match"
PAD, START, END = 0, 1, 2  # the lesson's ids; the value checks also use PAD_3 (0 is then a word)
PAD_3 = 3

# ---------------------------------------------------------------- make_batch

BATCH_LETTERS = {
    "src": "[B, S]",
    "src_mask": "[B, 1, 1, S]",
    "tgt_in": "[B, T]",
    "tgt_out": "[B, T]",
    "tgt_mask": "[B, 1, T, T]",
}
BATCH_RULES = {
    "src": "Each source is padded on the right with pad_id to the longest source, S.",
    "src_mask": "src_mask is padding_mask(src, pad_id): True at the source's real tokens.",
    "tgt_in": "tgt_in is <s> y_1 ... y_n, then pad_id up to T = the longest target + 1.",
    "tgt_out": "tgt_out is y_1 ... y_n </s>, then pad_id up to T = the longest target + 1.",
    "tgt_mask": "tgt_mask is decoder_mask(tgt_in, pad_id): True where key j <= query i and j is not padding.",
}
# B = 3 rows of different lengths: S = 5, T = 6 + 1 = 7; with pad_id 3, 0 is an ordinary word
SOURCES, TARGETS = [[5, 6, 7, 8, 9], [7, 4], [3, 8, 6, 5]], [[4, 3, 9], [6, 5, 7, 8, 3, 4], [9]]
SOURCES_3, TARGETS_3 = [[0, 6, 7], [7, 4, 0, 5, 9, 8], [5]], [[0, 4], [6, 0, 7, 8], [9, 5, 4]]


def expected_batch(sources, targets, pad_id: int, start_id: int, end_id: int) -> dict[str, torch.Tensor]:
    """The oracle: rows padded by pad_sequence, masks in PyTorch's conventions (masking.py)."""

    def padded(rows: list[list[int]]) -> torch.Tensor:
        return pad_sequence([torch.tensor(row, dtype=torch.long) for row in rows], True, pad_id)

    src = padded(sources)
    tgt_in = padded([[start_id, *t] for t in targets])
    tgt_out = padded([[*t, end_id] for t in targets])
    return {"src": src, "src_mask": masking.expected_padding(src, pad_id), "tgt_in": tgt_in,
            "tgt_out": tgt_out, "tgt_mask": masking.expected_decoder(tgt_in, pad_id)}  # fmt: skip


def _batch_variant(
    sources, targets, pad_id, start_id, end_id, *, shift=True, start=True, end=True, fill=None,
    tgt_mask="both", src_mask_from="source", inverted=False, out_padded_with_end=False, end_in_tgt_in=False,
):  # fmt: skip
    """make_batch with one thing done wrong, as a learner might write it."""
    fill = pad_id if fill is None else fill

    def padded(rows: list[list[int]], length: int, fill: int = fill) -> torch.Tensor:
        return torch.tensor([row + [fill] * (length - len(row)) for row in rows], dtype=torch.long)

    length = max(map(len, targets)) + 1
    src = padded(sources, max(map(len, sources)))
    tgt_out = padded([t + [end_id] * end for t in targets], length, end_id if out_padded_with_end else fill)
    tgt_in = padded([[start_id] * start + t for t in targets], length) if shift else tgt_out.clone()
    if end_in_tgt_in:  # <s> y </s> padded to T + 1, then cut as tgt_in = row[:-1]
        tgt_in = padded([[start_id] + t + [end_id] for t in targets], length + 1)[:, :length]
    src_mask = (src if src_mask_from == "source" else tgt_in) != pad_id
    masks = {
        "both": (tgt_in != pad_id)[:, None, None, :] & oracles.causal(length),
        "padding": (tgt_in != pad_id)[:, None, None, :],
        "causal": oracles.causal(length),
    }
    src_mask, tgt_mask = src_mask[:, None, None, :], masks[tgt_mask]
    if inverted:
        src_mask, tgt_mask = ~src_mask, ~tgt_mask
    return {"src": src, "src_mask": src_mask, "tgt_in": tgt_in, "tgt_out": tgt_out, "tgt_mask": tgt_mask}


BATCH_MISTAKES = core.catalogue(MAKE_BATCH, variant=_batch_variant)


def run_batch(fn, sources, targets, pad_id: int, start_id: int, end_id: int) -> dict[str, torch.Tensor]:
    """The learner's batch: a dict with the five keys, each a tensor; the input lists unchanged."""
    given = copy.deepcopy((sources, targets))
    batch = core.call(MAKE_BATCH, fn, sources, targets, pad_id, start_id, end_id)
    if (sources, targets) != given:
        raise core.CheckFailure(
            f"{MAKE_BATCH} changed the lists it was given (an .append, .insert or += on a row): build "
            "new lists, e.g. [start_id] + row, and leave the caller's lists as they were."
        )
    if not isinstance(batch, dict):
        raise core.CheckFailure(f"{MAKE_BATCH}: expected a dict of tensors, got {type(batch).__name__}")
    missing = [key for key in BATCH_LETTERS if key not in batch]
    if missing:
        raise core.CheckFailure(
            f"{MAKE_BATCH}: the batch has no key {', '.join(map(repr, missing))}. Expected the keys "
            f"{list(BATCH_LETTERS)}; yours are {list(batch)}."
        )
    for key in BATCH_LETTERS:
        core.expect_tensor(MAKE_BATCH, f"batch[{key!r}]", batch[key])
    return batch


def _same_tensor(actual: torch.Tensor, expected: torch.Tensor) -> bool:
    return (actual.dtype == expected.dtype and actual.shape == expected.shape
            and torch.equal(actual, expected.to(actual.device)))  # fmt: skip


TOKENS = ("src", "tgt_in", "tgt_out")


def _same_entries(actual: torch.Tensor, mistaken: torch.Tensor) -> bool:
    """The same dtype and entries, a mask given whole or broadcast ([T, T] as [B, 1, T, T])."""
    try:
        actual, mistaken = torch.broadcast_tensors(actual, mistaken.to(actual.device))
    except RuntimeError:
        return False
    return actual.dtype == mistaken.dtype and torch.equal(actual, mistaken)


def _name_batch_mistake(batch: dict, expected: dict, mistakes: list[tuple[core.Mistake, object]]) -> None:
    """Name the known mistake whose batch has every entry the learner got wrong (the learner may
    have made it in some of the tensors only: the source padded with 0, the targets with pad_id);
    a mistake in the tokens is not named when the learner's tokens are all right (its masks,
    made from its tokens, can look like a wrong mask's)."""
    wrong = [key for key in BATCH_LETTERS if not _same_tensor(batch[key], expected[key])]
    tokens_right = not set(wrong) & set(TOKENS)
    for mistake, output in mistakes:
        if not isinstance(output, dict):
            continue
        in_tokens = any(not _same_tensor(output[key], expected[key]) for key in TOKENS)
        if tokens_right and in_tokens:
            continue
        if all(_same_entries(batch[k], output[k]) for k in wrong):
            raise core.CheckFailure(mistake.message(MAKE_BATCH))


def _expect_the_extra_position(batch: dict, expected: dict) -> None:
    """tgt_in or tgt_out one position short of T = the longest target + 1 is told why T has the + 1."""
    b, t = expected["tgt_in"].shape
    short = [key for key in ("tgt_in", "tgt_out") if tuple(batch[key].shape) == (b, t - 1)]
    if short:
        raise core.CheckFailure(
            f"{MAKE_BATCH}: {' and '.join(f'batch[{key!r}]' for key in short)} "
            f"{'are' if len(short) == 2 else 'is'} [B, {t - 1}], the longest "
            f"target's length; T is that length + 1 = {t}, since <s> y (tgt_in) and y </s> (tgt_out) each "
            "hold one token more than y: the longest row would lose its </s>."
        )


def compare_batch(
    fn, sources, targets, pad_id, start_id, end_id, expected: Expected | None = None, values=True
) -> dict:
    """The learner's batch against ``expected()`` (default: the oracle), computed after the learner's
    call: dtypes and shapes, then (when ``values``) the entries; a known mistake is named first."""
    args = (sources, targets, pad_id, start_id, end_id)
    batch = run_batch(fn, *args)
    expected = expected_batch(*args) if expected is None else expected()
    if all(_same_tensor(batch[key], expected[key]) for key in BATCH_LETTERS):
        return batch
    form = all(
        batch[k].dtype == expected[k].dtype and batch[k].shape == expected[k].shape for k in BATCH_LETTERS
    )
    if values or not form:
        _name_batch_mistake(batch, expected, core.mistake_outputs(BATCH_MISTAKES, *args))
    _expect_the_extra_position(batch, expected)
    for key, letters in BATCH_LETTERS.items():
        what = f"batch[{key!r}]"
        core.expect_dtype(MAKE_BATCH, what, batch[key], expected[key].dtype)
        core.expect_shape(MAKE_BATCH, what, batch[key], letters, expected[key].shape)
    if values:
        ids = f" (pad_id = {pad_id}, start_id = {start_id}, end_id = {end_id})"
        for key, letters in BATCH_LETTERS.items():
            where = f"{ids} {BATCH_RULES[key]}"
            core.expect_close(MAKE_BATCH, f"batch[{key!r}]", batch[key], expected[key], letters, where=where)
    return batch


def check_make_batch_shapes(fn) -> None:
    """make_batch returns the five keys, with Long tokens and Bool masks of the right shapes."""
    compare_batch(fn, SOURCES, TARGETS, PAD, START, END, values=False)
    b, s, t = len(SOURCES), max(map(len, SOURCES)), max(map(len, TARGETS)) + 1
    core.passed(
        f"{MAKE_BATCH} returns src [B, S] = [{b}, {s}], tgt_in and tgt_out [B, T] = [{b}, {t}] (Long), "
        f"src_mask [B, 1, 1, S] and tgt_mask [B, 1, T, T] (Bool)"
    )


def check_make_batch_values(fn) -> None:
    """The same batch as the oracle, for pad_id 0 and for pad_id 3 (where 0 is an ordinary word)."""
    compare_batch(fn, SOURCES, TARGETS, PAD, START, END)
    compare_batch(fn, SOURCES_3, TARGETS_3, PAD_3, START, END)
    core.passed(
        f"{MAKE_BATCH}: tgt_in = <s> y, tgt_out = y </s>, padded with pad_id, and both masks right, "
        f"for pad_id = {PAD} and pad_id = {PAD_3}"
    )


# ---------------------------------------------------------------- sequence_loss

LOSS_LETTERS = "[] (one number)"
LOSS_RULE = (
    " The loss is the mean, over the tokens where target != pad_id, of (1 - smoothing) * "
    "-log_probs[b, t, target[b, t]] + smoothing * (-log_probs[b, t].mean())."
)
# B = 3 rows with 5, 3 and 2 real tokens, T = 5, V = 7; with pad_id 3, 0 is an ordinary word
LOSS_TARGET = [[4, 3, 6, 2, 5], [5, 1, 3, 0, 0], [6, 2, 0, 0, 0]]
LOSS_TARGET_3 = [[4, 0, 6, 2, 5], [5, 1, 0, 3, 3], [6, 2, 3, 3, 3]]
LOSS_V = 7
SMOOTHING, SMOOTHING_3 = 0.1, 0.25


def expected_loss(
    log_probs: torch.Tensor, target: torch.Tensor, pad_id: int, smoothing: float
) -> torch.Tensor:
    """PyTorch's cross-entropy (a log-softmax of log-probabilities changes nothing)."""
    vocab = log_probs.size(-1)
    return F.cross_entropy(
        log_probs.reshape(-1, vocab), target.reshape(-1), ignore_index=pad_id, label_smoothing=smoothing
    )


def _loss_variant(
    log_probs, target, pad_id, smoothing=0.0, *, ignore_pad=True, pad=None, reduce="mean", sign=1,
    smooth="all",
):  # fmt: skip
    """sequence_loss with one thing done wrong, as a learner might write it."""
    keep = (
        target != (pad_id if pad is None else pad)
        if ignore_pad
        else torch.ones_like(target, dtype=torch.bool)
    )
    picked = log_probs.gather(-1, target.unsqueeze(-1)).squeeze(-1)  # [B, T]
    nll, uniform = -picked, -log_probs.mean(dim=-1)
    if smooth == "others":
        uniform = -(log_probs.sum(dim=-1) - picked) / (log_probs.size(-1) - 1)
    elif smooth == "sum":  # the V tokens' -log p summed, without its 1/V
        uniform = -log_probs.sum(dim=-1)
    if smooth == "kl":  # The Annotated Transformer: KL to smoothing / (V - 2) off the target and pad_id
        smoothed = torch.full_like(log_probs, smoothing / (log_probs.size(-1) - 2))
        smoothed.scatter_(-1, target.unsqueeze(-1), 1.0 - smoothing)
        smoothed[..., pad_id] = 0.0
        loss = (torch.xlogy(smoothed, smoothed) - smoothed * log_probs).sum(dim=-1) * keep
    else:
        plain = (1 - smoothing, smoothing)
        weights = {"none": (1.0, 0.0), "swapped": (smoothing, 1 - smoothing)}.get(smooth, plain)
        loss = (weights[0] * nll + weights[1] * uniform) * keep
    if reduce == "sum":
        total = loss.sum()
    elif reduce == "rows":
        total = (loss.sum(dim=1) / keep.sum(dim=1)).mean()
    elif reduce == "batch":  # each sentence's summed loss, averaged over the B sentences
        total = loss.sum() / target.size(0)
    elif reduce == "all positions":  # the padding left out of the sum, but counted in the denominator
        total = loss.sum() / target.numel()
    else:
        total = loss.sum() / keep.sum()
    return sign * total


LOSS_MISTAKES = core.catalogue(LOSS, variant=_loss_variant)


def loss_inputs(rows: list[list[int]], seed: int, vocab: int = LOSS_V) -> tuple[torch.Tensor, torch.Tensor]:
    """log_probs [B, T, V] (a log-softmax of spread-out logits) and the target Long[B, T], on DEVICE."""
    target = torch.tensor(rows, dtype=torch.long, device=DEVICE)
    logits = random_tensor(*target.shape, vocab, seed=seed, scale=2.0)
    return torch.log_softmax(logits, dim=-1), target


def compare_loss(
    fn, log_probs, target, pad_id: int, smoothing: float, expected: Expected | None = None
) -> None:
    """The learner's loss against ``expected()`` (default: PyTorch's), computed after the learner's
    call, naming a known mistake; then that it carries a gradient back to log_probs."""
    inputs = {"log_probs": log_probs, "target": target, "pad_id": pad_id, "smoothing": smoothing}
    loss = core.output(LOSS, fn, inputs, "the loss")
    if loss.dim() != 0:
        raise core.CheckFailure(
            f"{LOSS}: expected the loss as one number (a tensor of shape []), got shape {list(loss.shape)}: "
            "average the per-token losses over the non-padding tokens of the whole batch."
        )
    mistakes = core.mistake_outputs(LOSS_MISTAKES, *inputs.values())
    where = f" (pad_id = {pad_id}, smoothing = {smoothing}){LOSS_RULE}"
    right = expected_loss(log_probs, target, pad_id, smoothing) if expected is None else expected()
    core.expect_close(LOSS, "the loss", loss, right, LOSS_LETTERS, mistakes, where)
    del right  # the learner's code runs again below: no answer stays within its reach
    leaf = log_probs.detach().clone().requires_grad_(True)
    loss = core.call(LOSS, fn, leaf, target, pad_id, smoothing)
    if not (isinstance(loss, torch.Tensor) and loss.requires_grad):
        raise core.CheckFailure(
            f"{LOSS}: the loss has the right value but no gradient: training needs loss.backward() to "
            "reach log_probs, so keep it a tensor computed from log_probs (no .item(), torch.tensor(...) "
            "or .detach() on the way)."
        )


def check_sequence_loss_values(fn) -> None:
    """Without smoothing: PyTorch's cross-entropy ignoring pad_id, for pad_id 0 and pad_id 3."""
    compare_loss(fn, *loss_inputs(LOSS_TARGET, seed=101), PAD, 0.0)
    compare_loss(fn, *loss_inputs(LOSS_TARGET_3, seed=102), PAD_3, 0.0)
    core.passed(
        f"{LOSS} equals F.cross_entropy(..., ignore_index=pad_id): the mean NLL over the non-padding "
        f"tokens, for pad_id = {PAD} and pad_id = {PAD_3}"
    )


def check_sequence_loss_smoothing(fn) -> None:
    """With smoothing: PyTorch's cross-entropy with label_smoothing, ignoring pad_id."""
    compare_loss(fn, *loss_inputs(LOSS_TARGET, seed=103), PAD, SMOOTHING)
    compare_loss(fn, *loss_inputs(LOSS_TARGET_3, seed=104), PAD_3, SMOOTHING_3)
    core.passed(
        f"{LOSS} equals F.cross_entropy(..., label_smoothing=smoothing) for smoothing = {SMOOTHING} "
        f"and {SMOOTHING_3}"
    )


# ---------------------------------------------------------------- rate

# (step, d_model, warmup, factor): during the warm-up, at its end and after it, two d_model, two factors
RATE_CASES = [(1, 512, 4000, 1.0), (100, 512, 4000, 1.0), (4000, 512, 4000, 1.0), (20000, 512, 4000, 1.0),
              (10, 16, 50, 2.0), (50, 16, 50, 2.0), (400, 16, 50, 2.0)]  # fmt: skip
RATE_RULE = "The rate is factor * d_model**-0.5 * min(step**-0.5, step * warmup**-1.5)."


def expected_rate(step: int, d_model: int, warmup: int, factor: float = 1.0) -> float:
    """The paper's schedule (section 5.3), scaled by factor."""
    return factor / math.sqrt(d_model) * min(1 / math.sqrt(step), step / warmup / math.sqrt(warmup))


def _rate_variant(step, d_model, warmup, factor=1.0, *, pick="min", warmup_power=-1.5, model_power=-0.5,
                  use_factor=True, offset=0, guard=True):  # fmt: skip
    """rate with one thing done wrong, as a learner might write it."""
    if guard and step < 1:
        raise ValueError(f"step must be at least 1, got {step}")
    step = step + offset
    choose = min if pick == "min" else max
    return (
        (factor if use_factor else 1.0)
        * d_model**model_power
        * choose(step**-0.5, step * warmup**warmup_power)
    )


RATE_MISTAKES = core.catalogue(RATE, variant=_rate_variant)


def _rate_text(case: tuple) -> str:
    step, d_model, warmup, factor = case
    return f"rate(step={step}, d_model={d_model}, warmup={warmup}, factor={factor})"


def _close(values: list, expected: list[float]) -> bool:
    return all(
        isinstance(v, int | float) and not isinstance(v, bool) and math.isclose(v, e, rel_tol=1e-6)
        for v, e in zip(values, expected, strict=True)
    )


def compare_rate(fn, cases: list[tuple], expected: Expected | None = None) -> None:
    """The learner's rates at ``cases`` against the list ``expected()`` gives (default: the
    formula), computed after the learner's calls: Python numbers, equal to 1e-6 relative; a known
    mistake is named."""
    values = [core.call(RATE, fn, *case) for case in cases]
    expected = [expected_rate(*case) for case in cases] if expected is None else expected()
    if _close(values, expected):
        return
    for mistake in RATE_MISTAKES:
        try:
            if _close(values, [mistake.compute(*case) for case in cases]):
                raise core.CheckFailure(mistake.message(RATE))
        except (ArithmeticError, ValueError):  # the mistake itself fails on these cases: not this one
            continue
    for case, value, right in zip(cases, values, expected, strict=True):
        if not isinstance(value, int | float) or isinstance(value, bool):
            raise core.CheckFailure(
                f"{RATE}: expected a Python float, got {type(value).__name__} from {_rate_text(case)}: "
                "compute with Python numbers (**, math.sqrt), or turn a tensor into one with .item()."
            )
        if not math.isclose(value, right, rel_tol=1e-6):
            raise core.CheckFailure(
                f"{RATE}: {_rate_text(case)} should be {right:.6g}, got {value:.6g} "
                f"({value / right:.4g} times it). {RATE_RULE}"
            )


def expect_step_0_refused(fn, d_model: int, warmup: int) -> None:
    """rate(0, ...) must raise ValueError; a ZeroDivisionError is the known mistake."""
    try:
        value = fn(0, d_model, warmup)
    except ValueError:
        return
    except ZeroDivisionError as error:
        raise core.CheckFailure(core.named(RATE_MISTAKES, "step 0 not refused").message(RATE)) from error
    except Exception as error:
        raise core.CheckFailure(
            f"{RATE}(0, {d_model}, {warmup}) raised {type(error).__name__}: {error}. Steps are counted "
            "from 1: raise a ValueError when step < 1."
        ) from error
    raise core.CheckFailure(
        f"{RATE}(0, {d_model}, {warmup}) returned {value!r}, and step 0 must be refused: steps are counted "
        "from 1 (the formula divides by zero at 0), so raise a ValueError when step < 1."
    )


def check_rate(fn) -> None:
    """The paper's schedule at seven steps (warm-up, peak, decay) for two d_model and two factors;
    step 0 raises ValueError."""
    compare_rate(fn, RATE_CASES)
    expect_step_0_refused(fn, 512, 4000)
    core.passed(
        f"{RATE} is factor * d_model^-0.5 * min(step^-0.5, step * warmup^-1.5) at {len(RATE_CASES)} "
        "steps (warm-up, peak and decay), and rate(0, ...) raises ValueError"
    )


# ---------------------------------------------------------------- exact_match

EXACT_RULE = (
    "A row is right when the tokens after <s>, up to and including its first end_id, are the "
    "target's up to and including its end_id."
)
# decodings wider than the target (L - 1 = T = 5): right and then more </s>, right and then other
# tokens, no </s>, a right row as long as the target, an extra token before </s>
PREDICTED_WIDE = [
    [1, 5, 6, 7, 2, 2],
    [1, 5, 6, 2, 7, 3],
    [1, 7, 3, 4, 4, 4],
    [1, 3, 4, 5, 6, 2],
    [1, 4, 5, 2, 2, 2],
]
TARGET_WIDE = [[5, 6, 7, 2, 0], [5, 6, 2, 0, 0], [7, 3, 4, 2, 0], [3, 4, 5, 6, 2], [4, 2, 0, 0, 0]]
# decodings cut off by max_len (L - 1 = 3 < T = 6): just before </s>, earlier, a short right row, wrong
PREDICTED_NARROW = [[1, 3, 4, 5], [1, 6, 7, 8], [1, 4, 2, 2], [1, 5, 5, 5]]
TARGET_NARROW = [[3, 4, 5, 2, 0, 0], [6, 7, 8, 9, 2, 0], [4, 2, 0, 0, 0, 0], [3, 5, 6, 7, 8, 2]]


def _up_to_end(row: list[int], end_id: int) -> list[int]:
    return row[: row.index(end_id) + 1] if end_id in row else row


def expected_exact_match(
    predicted: torch.Tensor, target: torch.Tensor, start_id: int, end_id: int
) -> torch.Tensor:
    """The oracle: each row's tokens after <s>, cut after the first end_id, against the target's."""
    rows = zip(predicted.tolist(), target.tolist(), strict=True)
    right = [p[0] == start_id and _up_to_end(p[1:], end_id) == _up_to_end(t, end_id) for p, t in rows]
    return torch.tensor(right, dtype=torch.bool, device=predicted.device)


def _exact_variant(predicted, target, start_id, end_id, *, drop_start=True, rule="exact"):
    """exact_match with one thing done wrong, as a learner might write it."""
    right = []
    for row, target_row in zip(predicted.tolist(), target.tolist(), strict=True):
        answer, output = _up_to_end(target_row, end_id), _up_to_end(row[1:] if drop_start else row, end_id)
        if rule == "index":  # list.index without asking first whether the row has an end_id
            output = row[1:] if drop_start else row
            right.append(output[: output.index(end_id) + 1] == answer)
        elif rule == "last":  # cut after the last end_id, not the first
            output = row[1:] if drop_start else row
            last = len(output) - output[::-1].index(end_id) if end_id in output else len(output)
            right.append(output[:last] == answer)
        elif rule == "no end":  # both without their end_id
            right.append(output[: len(output) - (end_id in output)] == answer[:-1])
        elif rule == "prefix":  # zip stops at the shorter list
            right.append(all(a == b for a, b in zip(row[1:], answer, strict=False)))
        elif rule == "filter":  # <s>, </s> and the lesson's padding dropped wherever they are, nothing cut
            special = (start_id, end_id, PAD)
            right.append([t for t in row if t not in special] == [t for t in target_row if t not in special])
        else:
            right.append(output == answer)
    return torch.tensor(right, dtype=torch.bool, device=predicted.device)


def _token_accuracy(predicted, target, start_id, end_id):
    accuracy = []
    for row, answer in zip(predicted.tolist(), target.tolist(), strict=True):
        answer = _up_to_end(answer, end_id)
        accuracy.append(sum(p == a for p, a in zip(row[1:], answer, strict=False)) / len(answer))
    return torch.tensor(accuracy, device=predicted.device)


EXACT_MISTAKES = core.catalogue(
    EXACT,
    {
        "whole row compared": lambda predicted, target, start_id, end_id: (predicted[:, 1:] == target).all(
            -1
        ),
        "token accuracy": _token_accuracy,
    },
    variant=_exact_variant,
)


def compare_exact_match(
    fn, predicted, target, start_id: int, end_id: int, expected: Expected | None = None
) -> None:
    """The learner's Bool[B] against ``expected()`` (default: the oracle), computed after the
    learner's call; a known mistake is named, a wrong row is shown."""
    inputs = {"predicted": predicted, "target": target, "start_id": start_id, "end_id": end_id}
    try:
        out = core.output(EXACT, fn, inputs)
    except core.CheckFailure as failure:
        cause = failure.__cause__  # list.index's own words: "2 is not in list"
        if isinstance(cause, ValueError) and "is not in list" in str(cause):
            mistake = core.named(EXACT_MISTAKES, "end token looked up with list.index")
            raise core.CheckFailure(mistake.message(EXACT)) from cause
        raise
    expected = expected_exact_match(*inputs.values()) if expected is None else expected()
    if _same_tensor(out, expected):
        return
    for mistake, wrong in core.mistake_outputs(EXACT_MISTAKES, *inputs.values()):
        if not isinstance(wrong, torch.Tensor):
            continue
        floats = out.is_floating_point() and wrong.is_floating_point()  # any float dtype: numbers
        if core.same(out, wrong) if floats else _same_tensor(out, wrong):
            raise core.CheckFailure(mistake.message(EXACT))
    if out.is_floating_point():
        raise core.CheckFailure(core.named(EXACT_MISTAKES, "token accuracy").message(EXACT))
    core.expect_dtype(EXACT, "the output", out, torch.bool)
    core.expect_shape(EXACT, "the output", out, "[B]", expected.shape)
    row = int((out != expected.to(out.device)).nonzero()[0])
    raise core.CheckFailure(
        f"{EXACT}: row {row} is wrong: predicted {predicted[row].tolist()}, target {target[row].tolist()} "
        f"(start_id = {start_id}, end_id = {end_id}): expected {bool(expected[row])}, got "
        f"{bool(out[row])}. {EXACT_RULE}"
    )


def tokens(rows: list[list[int]]) -> torch.Tensor:
    return torch.tensor(rows, dtype=torch.long, device=DEVICE)


def check_exact_match(fn) -> None:
    """Bool[B], right on decodings wider than the target (more after </s>) and cut off before it."""
    compare_exact_match(fn, tokens(PREDICTED_WIDE), tokens(TARGET_WIDE), START, END)
    compare_exact_match(fn, tokens(PREDICTED_NARROW), tokens(TARGET_NARROW), START, END)
    core.passed(
        f"{EXACT} returns Bool[B]: True exactly where the row up to its first </s> is the target, "
        "whatever follows the </s>, and False for a row cut off before its </s>"
    )


CATALOGUE = {MAKE_BATCH: BATCH_MISTAKES, LOSS: LOSS_MISTAKES, RATE: RATE_MISTAKES, EXACT: EXACT_MISTAKES}
