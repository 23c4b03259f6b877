"""Checks for lesson 11's cached_greedy_decode: greedy decoding with a key/value cache, judged on
its tokens, its log-probabilities and how it computes them (autograder/checks/efficiency.py)."""

import contextlib
import inspect
import types
from collections.abc import Iterator
from dataclasses import dataclass, field

import torch
from torch import nn

from autograder.checks import core, greedy, memo
from autograder.checks.answers import Expected
from autograder.checks.decoder_step import STEP, compare_steps, reference_step, step_case
from autograder.checks.device import DEVICE
from autograder.checks.stand_in_decoder import (
    split,
    stand_in_model,
)

CACHED = "cached_greedy_decode"


# ---------------------------------------------------------------------------------------
# cached_greedy_decode
# ---------------------------------------------------------------------------------------


def _cached_variant(
    model,
    src,
    src_mask,
    max_len,
    start_symbol,
    end_symbol=None,
    *,
    position="step",
    embed="scaled",
    final_norm=True,
    memory_proj="cross",
    memory_layer="own",
    caches="per layer",
    steps_extra=0,
    pad_finished=True,
    early_stop="all",
    append_last=True,
    use_end=True,
    work="cached",
):
    """cached_greedy_decode with one thing done wrong, as a learner might write it. The ``work``
    mistakes give the right tokens with more work than a cache needs: lesson 09's full decoding
    (``"full"``), the source encoded again at every step (``"encode"``), each layer's memory keys and
    values projected again at every step (``"memory"``), or the whole prefix run through
    decoder_layer_step again at every step, with fresh caches (``"prefix"``)."""
    if work == "full":
        return greedy.step_by_step(model, src, src_mask, max_len, start_symbol, end_symbol)
    if not use_end:
        end_symbol = None
    memory, ys, finished = greedy.begin(model, src, src_mask, start_symbol)
    layers = list(model.decoder.layers)

    def memory_keys_values():
        pairs = []
        for layer in layers:
            source = layers[0] if memory_layer == "first" else layer
            attn = source.self_attn if memory_proj == "self" else source.cross_attn
            n_heads = layer.self_attn.n_heads
            pairs.append((split(attn.w_k(memory), n_heads), split(attn.w_v(memory), n_heads)))
        return pairs

    memory_kv = memory_keys_values()
    per_layer = [{} for _ in layers]
    shared: dict = {}
    pe = model.positional.pe

    def embedded(tokens, row):  # [B, 1] -> [B, 1, D]
        table = model.tgt_embed.lut if embed == "lut" else model.tgt_embed  # lut: without sqrt(D)
        return table(tokens) + pe[row]

    for t in range(max_len - 1 + steps_extra):
        if work == "encode":
            memory = model.encode(src, src_mask)
        if work in ("encode", "memory"):
            memory_kv = memory_keys_values()
        row = {"step": t, "zero": 0, "next": t + 1}[position]
        if caches == "fresh" or work == "prefix":
            per_layer = [{} for _ in layers]
        fed = range(t + 1) if work == "prefix" else [t]  # the positions run through the layers
        for p in fed:
            x = embedded(ys[:, p : p + 1], row if p == t else p)
            for index, layer in enumerate(layers):
                if caches == "shared":
                    x, shared = reference_step(layer, x, memory_kv[index], src_mask, shared)
                else:
                    x, per_layer[index] = reference_step(
                        layer, x, memory_kv[index], src_mask, per_layer[index]
                    )
        x = x[:, -1]
        log_probs = model.generator(model.decoder.norm(x) if final_norm else x)
        next_token = log_probs.argmax(dim=-1)
        ys, finished, stop = greedy.end_step(
            ys, next_token, finished, end_symbol, pad_finished, early_stop, append_last
        )
        if stop:
            break
    return ys


CACHED_MISTAKES = core.catalogue(CACHED, variant=_cached_variant)
END_MISTAKES = greedy.END_MISTAKES
CACHED_B, CACHED_T_SRC, CACHED_MAX_LEN, START = 3, 6, 9, 1
TOKENS = "[B, L]"
# stand-in seeds and end symbols on which every catalogued mistake gives other tokens or other
# log-probabilities than the right ones and than every mistake before it, and the rows finish at
# different steps (visible: steps 2, 4 and 3; hidden: 4, 3 and 3); found by trying seeds 0 to 150
VISIBLE_SEED, VISIBLE_END = 63, 6
HIDDEN_SEED, HIDDEN_END = 124, 3


def cached_case(seed: int, batch=CACHED_B, t_src=CACHED_T_SRC, n_layers=2, norm_first=False,
                generator=None):  # fmt: skip
    """A StandInTransformer and a source [B, S] whose last row ends in padding (id 0)."""
    model = stand_in_model(seed, n_layers=n_layers, norm_first=norm_first)
    generator = generator or torch.Generator().manual_seed(seed + 1)
    src = torch.randint(1, 9, (batch, t_src), generator=generator)
    src[-1, t_src - max(1, t_src // 3) :] = 0
    src = src.to(DEVICE)
    return model, src, (src != 0)[:, None, None, :]


def full_log_probs(model, src, src_mask, tokens) -> torch.Tensor:
    """The log-probabilities full recomputation gives at each step for the prefixes in tokens
    [B, L]: [B, L - 1, V] (step i reads tokens[:, : i + 1]; the causal mask makes one pass enough)."""
    length = tokens.size(1) - 1
    causal = torch.ones(length, length, dtype=torch.bool, device=tokens.device).tril()
    with torch.no_grad():
        memory = model.encode(src, src_mask)
        return model.generator(model.decode(memory, src_mask, tokens[:, :-1], causal))


@contextlib.contextmanager
def recording(module: nn.Module) -> Iterator[list[torch.Tensor]]:
    """The outputs of every call of ``module`` inside the block (a forward hook in this process)."""
    calls: list[torch.Tensor] = []
    handle = module.register_forward_hook(lambda _m, _inputs, output: calls.append(output.detach().clone()))
    try:
        yield calls
    finally:
        handle.remove()


@dataclass
class Work:
    """What one decoding called on the model's parts, counted by forward hooks in the grader's
    process (where the model lives, under the judge too). A part computed from its weights with
    F.linear escapes the count, so every rule reads "at most": an honest fused projection passes."""

    encoder: int = 0  # calls of model.encoder
    full_layers: int = 0  # calls of a decoder layer's forward: a pass over the whole prefix
    memory: list[int] = field(default_factory=list)  # per layer: the most calls of cross_attn.w_k or w_v
    queries: list[list[int]] = field(default_factory=list)  # per layer: positions of each self_attn.w_q call


@contextlib.contextmanager
def counting(model: nn.Module) -> Iterator[Work]:
    """The work done on ``model`` inside the block: its encoder, its decoder layers' forwards, each
    layer's memory projections (cross_attn.w_k and w_v on more than one position) and queries."""
    work = Work()
    layers = list(model.decoder.layers)
    projections = [[0, 0] for _ in layers]
    work.queries = [[] for _ in layers]
    handles = []

    def hook(module: nn.Module, count) -> None:
        handles.append(
            module.register_forward_hook(lambda _m, inputs, _out: count(inputs[0] if inputs else None))
        )

    def add(attribute: str):
        def count(_x) -> None:
            setattr(work, attribute, getattr(work, attribute) + 1)

        return count

    def memory(index: int, which: int):
        def count(x: torch.Tensor) -> None:
            if isinstance(x, torch.Tensor) and x.dim() >= 2 and x.size(-2) > 1:  # memory [B, S, D]
                projections[index][which] += 1

        return count

    hook(model.encoder, add("encoder"))
    for index, layer in enumerate(layers):
        hook(layer, add("full_layers"))
        hook(layer.cross_attn.w_k, memory(index, 0))
        hook(layer.cross_attn.w_v, memory(index, 1))
        hook(
            layer.self_attn.w_q,
            lambda x, index=index: work.queries[index].append(
                x.size(-2) if isinstance(x, torch.Tensor) and x.dim() >= 2 else 1
            ),
        )
    try:
        yield work
    finally:
        for handle in handles:
            handle.remove()
        work.memory = [max(pair) for pair in projections]


def _expect_incremental(work: Work, steps: int) -> None:
    """The learner's tokens and log-probabilities are right; fail, naming the mistake, when they
    were computed with more work than a cache needs: the encoder once, each layer's memory keys and
    values once, one new position per step through each layer, never a layer's full forward."""

    def fail(name: str, seen: str) -> None:
        mistake = core.named(CACHED_MISTAKES, name)
        raise core.CheckFailure(
            f"{CACHED}: the tokens and log-probabilities are right, but not computed with the cache "
            f"({seen} for {steps} steps): {mistake.said()}. {mistake.hint}"
        )

    if work.full_layers:
        fail("decoder run over the whole prefix", f"a decoder layer's forward ran {work.full_layers} times")
    if work.encoder > 1:
        fail("source encoded at every step", f"model.encoder ran {work.encoder} times")
    if work.memory and max(work.memory) > 1:
        fail(
            "memory keys and values projected at every step",
            f"a layer's cross_attn.w_k or w_v ran on the memory {max(work.memory)} times",
        )
    for calls in work.queries:
        if len(calls) > steps or any(positions > 1 for positions in calls):
            fail(
                "whole prefix recomputed at every step",
                f"a layer's self_attn.w_q ran {len(calls)} times on {sum(calls)} positions in all",
            )


def _step_called_by(fn):
    """The decoder_layer_step the learner's cached_greedy_decode calls: the global of that name its
    code refers to. None where that cannot be read: under the judge ``fn`` stands for code in the
    learner's kernel (the notebook's own run of the same cell reads it there)."""
    if not isinstance(fn, types.FunctionType):
        return None
    try:
        step = inspect.getclosurevars(inspect.unwrap(fn)).globals.get(STEP)
    except (TypeError, ValueError):  # no plain function under the decorators: nothing to read
        return None
    return step if callable(step) else None


def _fault_in_step(fn, model) -> None:
    """Fail, saying so, when the decoder_layer_step that ``fn`` calls fails its own check on a layer
    like the model's (Post-LN or Pre-LN): the fault is there, not in cached_greedy_decode."""
    step = _step_called_by(fn)
    if step is None:
        return
    norm_first = bool(getattr(model.decoder.layers[0], "norm_first", False))
    case = step_case(seed=51 if norm_first else 41, norm_first=norm_first, batch=3, t_tgt=5, t_src=6)
    try:
        compare_steps(step, case)
    except core.CheckFailure as failure:
        raise core.CheckFailure(
            f"{CACHED}: the decoding is wrong, and the decoder_layer_step it calls fails its own check, "
            f"so the fault is there: {failure} Once decoder_layer_step passes its checks above, run this "
            "check again."
        ) from None


def run_cached(fn, model, src, src_mask, max_len, start_symbol, end_symbol=None):
    """The learner's tokens, the generator's outputs during the call, and the work it did."""
    inputs = {"model": model, "src": src, "src_mask": src_mask, "max_len": max_len}
    with recording(model.generator) as calls, counting(model) as work:
        try:
            out = core.output(CACHED, fn, inputs | {"start_symbol": start_symbol, "end_symbol": end_symbol})
        except core.CheckFailure as failure:
            if failure.__cause__ is not None and not isinstance(failure.__cause__, NotImplementedError):
                _fault_in_step(fn, model)  # a crash in decoder_layer_step is named there
            raise
    return out, calls, work


def _first_difference(out, expected) -> str:
    length = min(out.size(1), expected.size(1))
    wrong = (out[:, :length] != expected[:, :length].to(out.device)).nonzero()
    if len(wrong) == 0:
        return (
            f"the first {length} tokens of every row are right, but the output has {out.size(1)} "
            f"tokens per row, not {expected.size(1)}"
        )
    row, step = (int(i) for i in wrong[min(range(len(wrong)), key=lambda i: int(wrong[i][1]))])
    return (
        f"the first wrong token is in row {row} at step {step} (column {step} of {TOKENS}): expected "
        f"{int(expected[row, step])}, got {int(out[row, step])}; every earlier token is right"
    )


def _stacked(calls: list[torch.Tensor], batch: int) -> torch.Tensor | None:
    """The generator's outputs of one decoding, [B, steps, V], when it was called on all B rows
    with one position each time; else None (nothing to compare)."""
    if not calls or any(
        c.numel() != calls[0].numel() or c.numel() % batch or c.size(0) != batch for c in calls
    ):
        return None
    return torch.stack([c.reshape(batch, -1) for c in calls], dim=1)


def _same_log_probs(a: torch.Tensor | None, b: torch.Tensor | None) -> bool:
    return a is None or b is None or (a.shape == b.shape and core.same(a, b))


def _mistake_runs(args) -> list[tuple[core.Mistake, object, torch.Tensor | None]]:
    """Each mistake's tokens (or its error) and its generator outputs on these arguments; the same
    arguments again (a class's visible checks) are not run again (``memo``)."""
    return memo.remembered(_run_mistakes, args)


def _run_mistakes(args) -> list[tuple[core.Mistake, object, torch.Tensor | None]]:
    runs = []
    model, batch = args[0], args[1].size(0)
    with torch.no_grad():
        for mistake in CACHED_MISTAKES:
            with recording(model.generator) as calls:
                try:
                    tokens = mistake.compute(*args)
                except Exception as error:  # noqa: BLE001 - a mistake that crashes here matches nothing
                    tokens = error
            runs.append((mistake, tokens, _stacked(calls, batch)))
    return runs


def compare_cached(
    fn, model, src, src_mask, max_len, start_symbol, end_symbol=None, expected: Expected | None = None
) -> None:
    """The learner's tokens against ``expected()`` (default: full recomputation over model.decode,
    greedy.step_by_step), computed after the learner's call; then, where the learner's code called
    model.generator on all rows once per step, its log-probabilities against full recomputation's;
    a known mistake is named by both."""
    args = (model, src, src_mask, max_len, start_symbol, end_symbol)
    out, calls, work = run_cached(fn, *args)
    expected = greedy.step_by_step(*args) if expected is None else expected()
    mine = _stacked(calls, src.size(0))
    right_tokens = (
        out.dtype == torch.long and out.shape == expected.shape and torch.equal(out, expected.to(out.device))
    )
    if right_tokens and _same_log_probs(mine, full_log_probs(model, src, src_mask, out)):
        _expect_incremental(work, out.size(1) - 1)
        return
    _fault_in_step(fn, model)
    runs = _mistake_runs(args)
    if end_symbol is not None:  # the mistakes about end_symbol first: the others show without it
        runs = sorted(runs, key=lambda run: run[0].name not in END_MISTAKES)
    for mistake, tokens, log_probs in runs:
        if isinstance(tokens, torch.Tensor) and tokens.shape == out.shape and torch.equal(tokens, out):
            if _same_log_probs(mine, log_probs):
                raise core.CheckFailure(mistake.message(CACHED))
    core.expect_dtype(CACHED, "the output", out, torch.long)
    if right_tokens:
        expected_log_probs = full_log_probs(model, src, src_mask, out)
        error = (
            (mine.double() - expected_log_probs.double()).abs()
            if mine.shape == expected_log_probs.shape
            else None
        )
        size = (
            ""
            if error is None
            else f" by up to {float(error.max()):.3g} (the largest at step "
            f"{int(error.amax(dim=(0, 2)).argmax()) + 1})"
        )
        raise core.CheckFailure(
            f"{CACHED}: the tokens are right, but the log-probabilities that model.generator returned "
            f"differ from full recomputation{size}; the argmax hid it here. Look at what reaches "
            "model.generator: the last layer's output after model.decoder.norm, each token at its own "
            "position, each layer with its own cache and memory keys and values."
        )
    raise core.CheckFailure(
        f"{CACHED}: expected the same tokens as recomputing everything at each step (lesson 09's "
        f"greedy_decode), {TOKENS} = {list(expected.shape)}; {_first_difference(out, expected)}. Look at "
        "what changes from that step on: the position used for the newest token, the caches, the "
        "end_symbol handling."
    )


def check_cached_shapes(fn) -> None:
    """Long[B, max_len] without end_symbol, on the source's device, starting with start_symbol."""
    model, src, src_mask = cached_case(VISIBLE_SEED)
    out, _, _ = run_cached(fn, model, src, src_mask, CACHED_MAX_LEN, START)
    greedy.expect_max_len_tokens(CACHED, CACHED_MISTAKES, out, (CACHED_B, CACHED_MAX_LEN), src.device)


def check_cached_values(fn) -> None:
    """Without end_symbol: the same tokens as full recomputation, and the same log-probabilities."""
    model, src, src_mask = cached_case(VISIBLE_SEED)
    compare_cached(fn, model, src, src_mask, CACHED_MAX_LEN, START)
    try:  # the same model again, its source rows in the other order: nothing may carry over
        compare_cached(fn, model, src.flip(0), src_mask.flip(0), CACHED_MAX_LEN, START)
    except core.CheckFailure as failure:
        raise core.CheckFailure(
            f"{CACHED}: the first call was right, but a second call on the same model, with the source's "
            "rows in the other order, is not: keep nothing from one call to the next (make the caches and "
            f"the memory's keys and values anew in every call, never on the model). {failure}"
        ) from failure.__cause__
    core.passed(
        f"{CACHED} gives the same tokens as full recomputation (torch.equal) and the same "
        f"log-probabilities at every step (a 2-layer model, B = {CACHED_B}, a padded source row), "
        "and again on a second call with another source"
    )


def check_cached_end_symbol(fn) -> None:
    """With end_symbol: rows finish at different steps; finished rows keep producing it."""
    model, src, src_mask = cached_case(VISIBLE_SEED)
    compare_cached(fn, model, src, src_mask, CACHED_MAX_LEN, START, VISIBLE_END)
    out = greedy.step_by_step(model, src, src_mask, CACHED_MAX_LEN, START, VISIBLE_END)
    core.passed(
        f"{CACHED} with end_symbol = {VISIBLE_END}: rows that finish at different steps are padded "
        f"with it, and decoding stops after {out.size(1)} of max_len = {CACHED_MAX_LEN} tokens"
    )


CATALOGUE = {CACHED: CACHED_MISTAKES}
