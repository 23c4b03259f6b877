"""Checks for lesson 11: decoder_layer_step and cached_greedy_decode (a key/value cache), and
blockwise_attention (attention without the score matrix).

decoder_layer_step(layer, x, memory_kv, src_mask, cache) -> (out, cache)
    Run over the positions of a target one at a time, feeding back the cache it returns, on a
    decoder layer built here (the contract's attribute names: self_attn, cross_attn with w_q,
    w_k, w_v, w_o and n_heads, ffn, norm1..3, dropout1..3, norm_first). The outputs, stacked
    [B, T, D], must equal PyTorch's own nn.TransformerDecoderLayer run over all T positions at
    once with a causal mask, with the same weights; the cache must grow by one position per
    call, [B, h, t, d_k], and hold the self-attention's keys and values. Post-LN and Pre-LN,
    B = 2 and 3 with a padded source row.

cached_greedy_decode(model, src, src_mask, max_len, start_symbol, end_symbol=None)
    On a small Transformer built here (the lesson 09 names: src_embed, tgt_embed, positional
    with its table ``pe``, encoder, decoder with ``layers`` and ``norm``, generator), against
    full recomputation: the step-by-step loop of lesson 09's checks (greedy.step_by_step) over
    the model's own ``decode``. The tokens must be equal (torch.equal) and, where the learner's
    code calls ``model.generator`` once per step, the log-probabilities too (within float64
    tolerance): they are read with a forward hook on the generator, in the grader's process.

blockwise_attention(q, k, v, mask=None, block_size=64) -> out [..., T_q, d_v]
    Against PyTorch's F.scaled_dot_product_attention without a mask, and against softmax with
    masked keys filled with -inf and fully masked rows set to zero with one: several block sizes,
    a last block shorter than the others, scores that overflow exp, masks of three broadcast
    shapes with a query that may attend to no key. Its memory (the largest tensor it creates,
    ``largest_tensor``) is measured by an experiment cell of the lesson, not by a test cell: the
    judge reaches the learner's code only through inputs and outputs, so it could not see it.

The checks pass and read back plain data only (tensors, a dict of tensors, ints), so they run
the same through the judge, where a dict crosses as a copy: that is why decoder_layer_step
returns its cache rather than only updating the dict it was given.
"""

import contextlib
import inspect
import math
import types
from collections.abc import Iterator
from dataclasses import dataclass, field

import torch
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

from autograder.checks import core, greedy
from autograder.checks.device import DEVICE, DTYPE, random_mask, random_tensor
from autograder.checks.oracles import decoder_layer_state, plain_torch, torch_key_padding_mask, torch_layer
from autograder.checks.stand_in_decoder import (
    StandInDecoderLayer,
    attention,
    memory_kv_of,
    merge,
    split,
    stand_in_model,
)

STEP = "decoder_layer_step"
CACHED = "cached_greedy_decode"
STATES, CACHE = "[B, T, D]", "[B, h, t, d_k]"

# ---------------------------------------------------------------------------------------
# decoder_layer_step
# ---------------------------------------------------------------------------------------


def _step_variant(
    layer,
    x,
    memory_kv,
    src_mask,
    cache,
    *,
    append=True,
    attend="all",
    first_key_only=False,
    pass_src_mask=True,
    cross_from="memory",
    order="contract",
    pre_ln_keys="normed",
    scale="d_k",
    cat_dim=2,
):
    """decoder_layer_step with one thing done wrong, as a learner might write it."""
    cache = {} if cache is None else dict(cache)
    k_mem, v_mem = memory_kv
    n_heads = k_mem.size(1)
    norm_first = {"contract": layer.norm_first, "post": False, "pre": True, "inside": None}[order]

    def attend_to(q, k, v, mask):  # a hand-written attention, scaled by sqrt(d_k) or by sqrt(D)
        if scale == "D":
            q = q * math.sqrt(q.size(-1) / x.size(-1))  # q k^T / sqrt(D) instead of / sqrt(d_k)
        return attention(q, k, v, mask)

    def self_attention(h, raw):
        attn = layer.self_attn
        q = split(attn.w_q(h), n_heads)  # [B, h, 1, d_k]
        source = raw if pre_ln_keys == "raw" else h
        k_new, v_new = split(attn.w_k(source), n_heads), split(attn.w_v(source), n_heads)
        old_k, old_v = cache.get("k"), cache.get("v")
        if old_k is None:  # the first step: the new position is the only one
            old_k, old_v = k_new[:, :, :0], v_new[:, :, :0]  # no earlier position: [B, h, 0, d_k]
            k, v = k_new, v_new
        else:
            k, v = torch.cat([old_k, k_new], dim=cat_dim), torch.cat([old_v, v_new], dim=cat_dim)
        if append:
            cache["k"], cache["v"] = k, v  # [B, h, t, d_k]
        else:
            k, v = k_new, v_new
        if attend == "old":
            k, v = old_k, old_v
        elif attend == "new":  # the cache is kept up to date, but the attention does not read it
            k, v = k_new, v_new
        mask = None
        if first_key_only:
            mask = torch.zeros(1, k.size(2), dtype=torch.bool, device=k.device)
            mask[0, 0] = True  # the first row of causal_mask(t): only the first key
        return attn.w_o(merge(attend_to(q, k, v, mask)))

    def cross_attention(h):
        attn = layer.cross_attn
        q = split(attn.w_q(h), n_heads)
        k, v, mask = k_mem, v_mem, src_mask if pass_src_mask else None
        if cross_from == "x":  # the target position's own key and value (no source mask fits them)
            k, v, mask = split(attn.w_k(h), n_heads), split(attn.w_v(h), n_heads), None
        return attn.w_o(merge(attend_to(q, k, v, mask)))

    if norm_first is None:  # LayerNorm on the sub-layer's output, then the residual
        x = x + layer.norm1(self_attention(x, x))
        x = x + layer.norm2(cross_attention(x))
        x = x + layer.norm3(layer.ffn(x))
    elif norm_first:
        h = layer.norm1(x)
        x = x + self_attention(h, x)
        x = x + cross_attention(layer.norm2(x))
        x = x + layer.ffn(layer.norm3(x))
    else:
        x = layer.norm1(x + self_attention(x, x))
        x = layer.norm2(x + cross_attention(x))
        x = layer.norm3(x + layer.ffn(x))
    return x, cache


STEP_MISTAKES = core.catalogue(STEP, variant=_step_variant)


def reference_step(layer, x, memory_kv, src_mask, cache):
    """The checks' own decoder_layer_step (the variant with nothing done wrong)."""
    return _step_variant(layer, x, memory_kv, src_mask, cache)


class _Case:
    """A decoder layer, its inputs x [B, T, D] and memory [B, S, D] with a padded source row,
    and what full recomputation gives: the states [B, T, D] and the keys and values [B, h, T, d_k]."""

    def __init__(self, layer, x, memory, src_mask, states, keys, values):
        self.layer, self.x, self.memory, self.src_mask = layer, x, memory, src_mask
        self.states, self.keys, self.values = states, keys, values
        self.memory_kv = memory_kv_of(layer, memory)


def full_keys_values(layer, x) -> tuple[torch.Tensor, torch.Tensor]:
    """The self-attention's keys and values of every position of x [B, T, D]: [B, h, T, d_k]."""
    with torch.no_grad():
        h = layer.norm1(x) if layer.norm_first else x
        n_heads = layer.self_attn.n_heads
        return split(layer.self_attn.w_k(h), n_heads), split(layer.self_attn.w_v(h), n_heads)


def step_case(seed: int, norm_first: bool, batch=2, t_tgt=4, t_src=5, d_model=8, n_heads=2, d_ff=16) -> _Case:
    """A StandInDecoderLayer with the weights of a seeded nn.TransformerDecoderLayer, random inputs,
    and PyTorch's own full forward over all positions with a causal mask as the expected states."""
    oracle = torch_layer(True, d_model, n_heads, d_ff, norm_first, seed=seed)
    layer = StandInDecoderLayer(d_model, n_heads, d_ff, norm_first).to(device=DEVICE, dtype=DTYPE)
    layer.load_state_dict(decoder_layer_state(oracle), strict=True)
    layer.eval()
    generator = torch.Generator().manual_seed(seed + 1)
    x = torch.randn(batch, t_tgt, d_model, generator=generator, dtype=DTYPE).to(DEVICE)
    memory = torch.randn(batch, t_src, d_model, generator=generator, dtype=DTYPE).to(DEVICE)
    src_mask = torch.ones(batch, 1, 1, t_src, dtype=torch.bool)
    src_mask[-1, ..., t_src - max(1, t_src // 3) :] = False  # the last row ends in padding
    src_mask = src_mask.to(DEVICE)
    # PyTorch's causal attn_mask: True where a key may NOT be attended to (after the query)
    future = torch.ones(t_tgt, t_tgt, dtype=torch.bool, device=DEVICE).triu(1)
    with plain_torch():
        states = oracle(x, memory, tgt_mask=future, memory_key_padding_mask=torch_key_padding_mask(src_mask))
    return _Case(layer, x, memory, src_mask, states, *full_keys_values(layer, x))


def case_from(layer, x, memory, src_mask, states) -> _Case:
    """A case on any decoder layer with the contract's names (the hidden tests' reference layer)."""
    return _Case(layer, x, memory, src_mask, states, *full_keys_values(layer, x))


def _steps(exercise_fn, case: _Case, learner: bool):
    """Run a decoder_layer_step over the case's positions one at a time, feeding back the cache it
    returns (a copy of it each time, as the judge's socket gives). Returns (states [B, T, D], caches
    after each step). For the learner's code, a wrong kind of result becomes a message."""
    cache: dict = {}
    outputs, caches = [], []
    for t in range(case.x.size(1)):
        inputs = {
            "layer": case.layer,
            "x": case.x[:, t : t + 1],
            "memory_kv": case.memory_kv,
            "src_mask": case.src_mask,
            "cache": dict(cache),
        }
        if not learner:
            out, cache = exercise_fn(*inputs.values())
        else:
            with core.unchanged(STEP, x=inputs["x"], src_mask=case.src_mask), torch.no_grad():
                try:
                    result = core.call(STEP, exercise_fn, *inputs.values())
                except core.CheckFailure as failure:
                    if t > 0 and _size_error(failure.__cause__):
                        raise core.CheckFailure(
                            _crash_with_cache(t + 1, failure.__cause__)
                        ) from failure.__cause__
                    raise
            if not (isinstance(result, tuple | list) and len(result) == 2):
                raise core.CheckFailure(
                    f"{STEP}: expected a pair (out, cache), out [B, 1, D] and the updated cache dict, got "
                    f"{type(result).__name__}. End the function with `return x, cache`."
                )
            out, cache = result
            out = core.expect_tensor(STEP, "out, the first thing returned", out).detach()
            if not isinstance(cache, dict):
                raise core.CheckFailure(
                    f"{STEP}: expected the second thing returned to be the cache, a dict with 'k' and "
                    f"'v', got {type(cache).__name__}"
                )
            expected = (case.x.size(0), 1, case.x.size(2))
            core.expect_shape(STEP, f"out at step t = {t + 1}", out, "[B, 1, D]", expected)
        outputs.append(out)
        caches.append(cache)
    return torch.cat(outputs, dim=1), caches


def _size_error(error: BaseException | None) -> bool:
    """A RuntimeError about sizes or shapes (not a stub's NotImplementedError, a RuntimeError too)."""
    words = ("size", "shape", "dimension")
    return (
        isinstance(error, RuntimeError)
        and not isinstance(error, NotImplementedError)
        and any(word in str(error).lower() for word in words)
    )


def _crash_with_cache(t: int, error: BaseException) -> str:
    """The message for a size error at step t >= 2, the first steps whose cache is not empty."""
    mistake = core.named(STEP_MISTAKES, "cache concatenated along the wrong axis")
    return (
        f"{STEP}: step t = {t} raised {type(error).__name__}: {error}. Step 1, with an empty cache, ran, "
        f"so the cached keys and values and the new ones do not fit together: {mistake.name}. {mistake.hint}"
    )


def _cache_lengths(caches: list[dict]) -> tuple:
    """How many positions cache['k'] holds after each step (None where it holds no tensor)."""
    return tuple(c["k"].size(2) if isinstance(c.get("k"), torch.Tensor) else None for c in caches)


def _mistake_states(case: _Case) -> list[tuple[core.Mistake, object, tuple]]:
    """Each mistake with its stacked states [B, T, D] (or its error) and its cache lengths."""
    found = []
    with torch.no_grad():
        for mistake in STEP_MISTAKES:
            try:
                states, caches = _steps(mistake.compute, case, learner=False)
                found.append((mistake, states, _cache_lengths(caches)))
            except Exception as error:  # noqa: BLE001 - a mistake that crashes here matches no output
                found.append((mistake, error, ()))
    return found


def _matching_step_mistake(states: torch.Tensor, caches: list[dict], case: _Case) -> core.Mistake | None:
    """The known mistake whose states match the learner's; where several do (a cache never stored,
    a cache stored but not read), the one whose cache grows as the learner's does."""
    candidates = [
        (mistake, lengths)
        for mistake, outcome, lengths in _mistake_states(case)
        if isinstance(outcome, torch.Tensor) and core.same(states, outcome)
    ]
    mine = _cache_lengths(caches)
    for mistake, lengths in candidates:
        if lengths == mine:
            return mistake
    return candidates[0][0] if candidates else None


def compare_steps(fn, case: _Case) -> None:
    """The learner's step, run over every position, against full recomputation: the states, then
    the cache's shape and contents after each step."""
    states, caches = _steps(fn, case, learner=True)
    where = (
        " Index T = i of the stacked output is step t = i + 1. Wrong already at T = 0 (the first "
        "step, an empty cache) points at the sub-layers: residuals, LayerNorms, cross-attention; "
        "right at T = 0 but wrong from T = 1 on points at how the cache is stored and used."
    )
    if not core.same(states, case.states):  # the known mistakes are computed only when needed
        mistake = _matching_step_mistake(states, caches, case)
        if mistake is not None:
            raise core.CheckFailure(mistake.message(STEP))
        core.expect_close(STEP, "the stacked output of steps 1..T", states, case.states, STATES, (), where)
    batch, n_heads, _, d_k = case.keys.shape
    for t, cache in enumerate(caches, start=1):
        for name, full in (("k", case.keys), ("v", case.values)):
            if cache.get(name) is None:
                raise core.CheckFailure(
                    f"{STEP}: after step t = {t} the returned cache has no {name!r}; store the keys and "
                    f"values of positions 1..t in it: cache[{name!r}] = torch.cat([old, new], dim=2)."
                )
            got = core.expect_tensor(STEP, f"cache[{name!r}]", cache[name]).detach()
            core.expect_shape(
                STEP, f"cache[{name!r}] after step t = {t}", got, CACHE, (batch, n_heads, t, d_k)
            )
            if not core.same(got, full[:, :, :t]):
                what = "keys" if name == "k" else "values"
                raise core.CheckFailure(
                    f"{STEP}: after step t = {t}, cache[{name!r}] has the right shape {CACHE} but not the "
                    f"self-attention's {what} of positions 1..t: it should hold split_heads("
                    f"layer.self_attn.w_{name}(h)) of each position, where h is the layer's input (Post-LN) "
                    f"or norm1 of it (Pre-LN), in order along dim=2."
                )


def check_step_cache(fn) -> None:
    """Post-LN, B = 2, T = 3: returns (out [B, 1, D], cache), and the cache grows [B, h, t, d_k]."""
    case = step_case(seed=31, norm_first=False, batch=2, t_tgt=3)
    compare_steps(fn, case)
    b, h, _, d_k = case.keys.shape
    core.passed(
        f"{STEP} returns (out [B, 1, D], cache) and the cache grows by one position per call: "
        f"{CACHE} = [{b}, {h}, t, {d_k}] for t = 1, 2, 3, holding the self-attention's keys and values"
    )


def check_step_post_ln(fn) -> None:
    """Post-LN, B = 3, T = 5, a padded source row: equal to the full layer's forward, position by position."""
    case = step_case(seed=41, norm_first=False, batch=3, t_tgt=5, t_src=6)
    compare_steps(fn, case)
    core.passed(
        f"{STEP} (Post-LN) equals the full DecoderLayer with a causal mask at every one of T = 5 "
        "positions (PyTorch's nn.TransformerDecoderLayer, B = 3, a padded source row)"
    )


def check_step_pre_ln(fn) -> None:
    """Pre-LN (norm_first=True), B = 3, T = 5, a padded source row."""
    case = step_case(seed=51, norm_first=True, batch=3, t_tgt=5, t_src=6)
    compare_steps(fn, case)
    core.passed(
        f"{STEP} (Pre-LN, norm_first=True) equals the full DecoderLayer with a causal mask at every "
        "one of T = 5 positions (B = 3, a padded source row)"
    )


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
            f"({seen} for {steps} steps): {mistake.name}. {mistake.hint}"
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
    """Each mistake's tokens (or its error) and its generator outputs on these arguments."""
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


def compare_cached(fn, model, src, src_mask, max_len, start_symbol, end_symbol=None, expected=None) -> None:
    """The learner's tokens against ``expected`` (default: full recomputation over model.decode,
    greedy.step_by_step), then, where the learner's code called model.generator on all rows once
    per step, its log-probabilities against full recomputation's; a known mistake is named by both."""
    args = (model, src, src_mask, max_len, start_symbol, end_symbol)
    out, calls, work = run_cached(fn, *args)
    if expected is None:
        expected = greedy.step_by_step(*args)
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
    core.passed(
        f"{CACHED} gives the same tokens as full recomputation (torch.equal) and the same "
        f"log-probabilities at every step (a 2-layer model, B = {CACHED_B}, a padded source row)"
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


def _blockwise_variant(
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
):
    """blockwise_attention with one thing done wrong, as a learner might write it: exp of the raw
    scores (``running_max``), the old sum or output not rescaled when the maximum grows
    (``rescale``: "sum" or "output" rescales only that one, "none" neither), each block's own softmax averaged
    (``own_blocks``), the mask left out or filled with -1e9, no guard for a row that has seen no
    allowed key (``guard``), the remainder block left out, the scores not divided by sqrt(d_k)."""
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
        end = min(start + block_size, t_k)
        scores = q @ k[..., start:end, :].transpose(-2, -1) * scale  # [..., T_q, b]
        if mask is not None and use_mask:
            block_mask = mask[..., start:end] if mask.size(-1) > 1 else mask
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


BLOCKWISE_MISTAKES = core.catalogue(BLOCKWISE, variant=_blockwise_variant)


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
    with core.sizes(letters):
        return core.output(BLOCKWISE, fn, inputs)


def compare_blockwise(fn, q, k, v, mask=None, block_size=64, expected=None, where="", advice="") -> None:
    """The learner's output against ``expected`` (default: ``blockwise_expected``), a known mistake
    named by its output on the same inputs; ``where`` adds to what the inputs were, ``advice`` ends
    a message that names no mistake."""
    out = run_blockwise(fn, q, k, v, mask, block_size)
    expected = blockwise_expected(q, k, v, mask) if expected is None else expected
    mistakes = core.mistake_outputs(BLOCKWISE_MISTAKES, q, k, v, mask, block_size)
    blocks = -(-k.size(-2) // block_size)
    plural = "s" if blocks > 1 else ""
    said = f" That was with block_size = {block_size} ({blocks} block{plural} of keys){where}."
    core.expect_close(BLOCKWISE, "the output", out, expected, OUT, mistakes, said + advice)


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
            f"are NaN or infinite, and exp(710) already overflows in float64. It looks like {mistake.name}. "
            f"{mistake.hint}"
        )
    compare_blockwise(fn, q, k, v, None, 8, where=f", scores up to {largest:.0f}")
    core.passed(f"{BLOCKWISE} stays finite and right with scores up to {largest:.0f} (exp(710) overflows)")


def _masks(q, k, seed: int) -> dict[str, torch.Tensor]:
    """Three broadcast shapes, True = may attend: [B, 1, T_q, T_k] with query 2 that may attend to no
    key, a padding mask [B, 1, 1, T_k] (the last row ends in 7 padded keys) and a causal [T_q, T_k]."""
    full = random_mask(q.size(0), q.size(-2), k.size(-2), seed=seed)
    full[:, :, 2, :] = False  # query 2 may attend to no key at all
    padding = torch.ones(q.size(0), 1, 1, k.size(-2), dtype=torch.bool, device=q.device)
    padding[-1, ..., -7:] = False
    causal = torch.ones(q.size(-2), k.size(-2), dtype=torch.bool, device=q.device).tril()
    return {"[B, 1, T_q, T_k]": full, "[B, 1, 1, T_k]": padding, "[T_q, T_k]": causal}


def check_blockwise_mask(fn) -> None:
    """Masks of three broadcast shapes (True = may attend), one with a query that may attend to no key:
    masked keys have no effect, and that query's output is zeros, never NaN."""
    q, k, v = _blockwise_inputs(seed=130)
    for letters, mask in _masks(q, k, seed=131).items():
        compare_blockwise(fn, q, k, v, mask, 8, where=f", a mask {letters}")
    core.passed(
        f"{BLOCKWISE} applies masks [B, 1, T_q, T_k], [B, 1, 1, T_k] and [T_q, T_k] block by block, and "
        "gives zeros, not NaN, for a query that may attend to no key"
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


CATALOGUE = {STEP: STEP_MISTAKES, CACHED: CACHED_MISTAKES, BLOCKWISE: BLOCKWISE_MISTAKES}
