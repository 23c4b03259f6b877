"""Checks for lesson 11's decoder_layer_step: one decoder layer run one position at a time, with a
key/value cache (the checks are described in autograder/checks/efficiency.py)."""

import math

import torch

from autograder.checks import core
from autograder.checks.answers import Expected, torch_answer
from autograder.checks.device import DEVICE, DTYPE
from autograder.checks.oracles import decoder_layer_state, torch_key_padding_mask, torch_layer
from autograder.checks.stand_in_decoder import (
    StandInDecoderLayer,
    attention,
    memory_kv_of,
    merge,
    split,
)

STEP = "decoder_layer_step"
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
    newest_first=False,
    keep_newest_only=False,
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
        elif newest_first:  # the new position in front of the cached ones
            k, v = torch.cat([k_new, old_k], dim=cat_dim), torch.cat([v_new, old_v], dim=cat_dim)
        else:
            k, v = torch.cat([old_k, k_new], dim=cat_dim), torch.cat([old_v, v_new], dim=cat_dim)
        if append and keep_newest_only:  # attends over old and new, then stores the new one alone
            cache["k"], cache["v"] = k_new, v_new  # [B, h, 1, d_k]
        elif append:
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
    and what full recomputation gives: the states [B, T, D] and the keys and values [B, h, T, d_k],
    computed on each use and never kept (no answer within the learner's reach: answers.py)."""

    def __init__(self, layer, x, memory, src_mask, states: Expected):
        self.layer, self.x, self.memory, self.src_mask = layer, x, memory, src_mask
        self._states = states
        self.memory_kv = memory_kv_of(layer, memory)

    @property
    def states(self) -> torch.Tensor:
        return self._states()

    @property
    def keys(self) -> torch.Tensor:
        return full_keys_values(self.layer, self.x)[0]

    @property
    def values(self) -> torch.Tensor:
        return full_keys_values(self.layer, self.x)[1]


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
    masks = {"tgt_mask": future, "memory_key_padding_mask": torch_key_padding_mask(src_mask)}
    return _Case(layer, x, memory, src_mask, torch_answer(oracle, x, memory, **masks))


def case_from(layer, x, memory, src_mask, states: Expected) -> _Case:
    """A case on any decoder layer with the contract's names (the hidden tests' reference layer)."""
    return _Case(layer, x, memory, src_mask, states)


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
        f"so the cached keys and values and the new ones do not fit together: {mistake.said()}. "
        f"{mistake.hint}"
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
    if not core.same(states, right := case.states):  # the known mistakes are computed only when needed
        mistake = _matching_step_mistake(states, caches, case)
        if mistake is not None:
            raise core.CheckFailure(mistake.message(STEP))
        held, wanted = _cache_lengths(caches), tuple(range(1, len(caches) + 1))
        if held != wanted:
            where += (
                f" After steps 1..{len(caches)} your cache['k'] held {list(held)} positions; after step t "
                f"it must hold all t, {CACHE} with t = {list(wanted)}."
            )
        core.expect_close(STEP, "the stacked output of steps 1..T", states, right, STATES, (), where)
    keys, values = full_keys_values(case.layer, case.x)
    batch, n_heads, _, d_k = keys.shape
    for t, cache in enumerate(caches, start=1):
        for name, full in (("k", keys), ("v", values)):
            if cache.get(name) is None:
                raise core.CheckFailure(
                    f"{STEP}: after step t = {t} the returned cache has no {name!r}; store the keys and "
                    f"values of positions 1..t in it: cache[{name!r}] = torch.cat([old, new], dim=2)."
                )
            got = core.expect_tensor(STEP, f"cache[{name!r}]", cache[name]).detach()
            core.expect_shape(
                STEP, f"cache[{name!r}] after step t = {t}", got, CACHE, (batch, n_heads, t, d_k)
            )
            if not core.same(got, full[:, :, :t]) and core.same(got, full[:, :, :t].flip(2)):
                raise core.CheckFailure(
                    core.named(STEP_MISTAKES, "cache holds the newest position first").message(STEP)
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


# what a passing check of each layer order says: Post-LN first, then Pre-LN
LAYER_ORDER_PASSED = {
    False: f"{STEP} (Post-LN) equals the full DecoderLayer with a causal mask at every one of T = 5 "
    "positions (PyTorch's nn.TransformerDecoderLayer, B = 3, a padded source row)",
    True: f"{STEP} (Pre-LN, norm_first=True) equals the full DecoderLayer with a causal mask at every "
    "one of T = 5 positions (B = 3, a padded source row)",
}


def _check_layer_order(fn, norm_first: bool) -> None:
    """B = 3, T = 5, a padded source row: equal to the full layer's forward, position by position."""
    case = step_case(seed=51 if norm_first else 41, norm_first=norm_first, batch=3, t_tgt=5, t_src=6)
    compare_steps(fn, case)
    core.passed(LAYER_ORDER_PASSED[norm_first])


def check_step_post_ln(fn) -> None:
    """Post-LN, B = 3, T = 5, a padded source row: equal to the full layer's forward, position by position."""
    _check_layer_order(fn, norm_first=False)


def check_step_pre_ln(fn) -> None:
    """Pre-LN (norm_first=True), B = 3, T = 5, a padded source row."""
    _check_layer_order(fn, norm_first=True)


CATALOGUE = {STEP: STEP_MISTAKES}
