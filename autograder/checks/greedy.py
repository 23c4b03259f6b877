"""Checks for lesson 09's greedy_decode(model, src, src_mask, max_len, start_symbol, end_symbol=None).

It is checked on a small deterministic stand-in model (encode / decode / generator, written
here) against a step-by-step argmax loop written here, so it does not depend on the learner's
Transformer. The stand-in's decoder mixes positions twice and pools the memory under src_mask,
so a missing causal mask, a missing src_mask, a token not fed back or the wrong position all
change the tokens.
"""

import math

import torch
from torch import nn

from autograder.checks import core, oracles
from autograder.checks.answers import Expected
from autograder.checks.device import DEVICE, DTYPE, exact_matmul

GREEDY = "greedy_decode"
GREEDY_B, GREEDY_T_SRC, GREEDY_SRC_VOCAB, GREEDY_VOCAB, GREEDY_D = 3, 6, 8, 10, 6
GREEDY_MAX_LEN, START = 9, 1
TOKENS = "[B, L]"
# stand-in seeds and end symbols (found with choose_end_symbol) on which every known mistake shows
VISIBLE_SEED, VISIBLE_END = 23, 6
HIDDEN_SEED, HIDDEN_END = 29, 3


class _StandInGenerator(nn.Module):
    def __init__(self, weight: torch.Tensor, bias: torch.Tensor):
        super().__init__()
        self.weight = nn.Parameter(weight, requires_grad=False)
        self.bias = nn.Parameter(bias, requires_grad=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.log_softmax(x @ self.weight.T + self.bias, dim=-1)


class StandInModel(nn.Module):
    """A small deterministic model with the Transformer's interface: encode, decode, generator.

    decode mixes the target positions twice under tgt_mask (a masked mean, then a second one over
    the first's results), so a future token reaches an earlier position unless the mask is causal,
    and pools the memory under src_mask. Tokens are embedded with their position.
    """

    def __init__(self, seed: int, src_vocab=GREEDY_SRC_VOCAB, tgt_vocab=GREEDY_VOCAB, d_model=GREEDY_D,
                 max_positions=32):  # fmt: skip
        super().__init__()
        generator = torch.Generator().manual_seed(seed)

        def parameter(*shape, scale=1.0):
            values = torch.randn(*shape, generator=generator, dtype=DTYPE) * scale
            return nn.Parameter(values.to(DEVICE), requires_grad=False)

        self.src_table = parameter(src_vocab, d_model)
        self.tgt_table = parameter(tgt_vocab, d_model)
        self.positions = parameter(max_positions, d_model, scale=0.7)
        self.w_self = parameter(d_model, d_model, scale=1.5 / math.sqrt(d_model))
        self.w_cross = parameter(d_model, d_model, scale=1.5 / math.sqrt(d_model))
        self.w_mix = parameter(d_model, d_model, scale=1.5 / math.sqrt(d_model))
        self.generator = _StandInGenerator(
            torch.randn(tgt_vocab, d_model, generator=generator, dtype=DTYPE).to(DEVICE) * 2.0,
            torch.randn(tgt_vocab, generator=generator, dtype=DTYPE).to(DEVICE) * 0.3,
        )

    def forward(self, *args, **kwargs):
        raise TypeError(
            "greedy_decode should call model.encode once and model.decode at every step, not model(...)"
        )

    def encode(self, src: torch.Tensor, src_mask: torch.Tensor | None) -> torch.Tensor:
        return torch.tanh(self.src_table[src] + self.positions[: src.size(1)])  # [B, T_src, D]

    @staticmethod
    def _mean(mask: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        weights = mask.to(x.dtype)
        return weights @ x / weights.sum(-1, keepdim=True).clamp(min=1.0)

    def decode(self, memory, src_mask, tgt, tgt_mask) -> torch.Tensor:
        batch, length = tgt.shape
        x = self.tgt_table[tgt.long()] + self.positions[:length]  # [B, t, D]
        if tgt_mask is None:
            rows = torch.ones(batch, length, length, dtype=torch.bool, device=x.device)
        else:
            mask = tgt_mask[:, 0] if tgt_mask.dim() == 4 else tgt_mask
            rows = mask.to(x.device).expand(batch, length, length)
        keys = (
            torch.ones(batch, memory.size(1), dtype=torch.bool, device=x.device)
            if src_mask is None
            else src_mask.reshape(src_mask.size(0), -1).expand(batch, memory.size(1))
        )
        h = torch.tanh(x + self._mean(rows, x) @ self.w_self)
        pooled = self._mean(keys[:, None, :], memory)  # [B, 1, D]
        h = torch.tanh(h + pooled @ self.w_cross)
        return torch.tanh(h + self._mean(rows, h) @ self.w_mix)  # [B, t, D]


def step_by_step(model, src, src_mask, max_len, start_symbol, end_symbol=None) -> torch.Tensor:
    """Greedy decoding written out one row and one step at a time: the check's own oracle."""
    with torch.no_grad():
        memory = model.encode(src, src_mask)
        rows = [[start_symbol] for _ in range(src.size(0))]
        done = [False] * src.size(0)
        while len(rows[0]) < max_len and not (end_symbol is not None and all(done)):
            tokens = torch.tensor(rows, dtype=torch.long, device=src.device)
            length = tokens.size(1)
            log_probs = model.generator(
                model.decode(memory, src_mask, tokens, oracles.causal(length, src.device))
            )
            for row, scores in enumerate(log_probs[:, length - 1]):
                token = end_symbol if done[row] else int(scores.argmax())
                rows[row].append(token)
                done[row] = done[row] or token == end_symbol
        return torch.tensor(rows, dtype=torch.long, device=src.device)


def _greedy_variant(
    model,
    src,
    src_mask,
    max_len,
    start_symbol,
    end_symbol=None,
    *,
    pick="last",
    feed="all",
    causal=True,
    pass_src_mask=True,
    steps_extra=0,
    dtype=torch.long,
    pad_finished=True,
    early_stop="all",
    append_last=True,
    use_end=True,
    set_eval=False,
):
    """greedy_decode with one thing done wrong, as a learner might write it."""
    if not use_end:
        end_symbol = None
    if set_eval:
        model.eval()
    memory, ys, finished = begin(model, src, src_mask, start_symbol, dtype)
    for _ in range(max_len - 1 + steps_extra):
        if feed == "all":
            inputs = ys
        elif feed == "start":
            inputs = torch.full_like(ys, start_symbol)
        else:  # only the last token
            inputs = ys[:, -1:]
        mask = oracles.causal(inputs.size(1), src.device) if causal else None
        out = model.decode(memory, src_mask if pass_src_mask else None, inputs, mask)
        if pick == "last":
            next_token = model.generator(out[:, -1]).argmax(dim=-1)
        elif pick == "first":
            next_token = model.generator(out[:, 0]).argmax(dim=-1)
        else:  # argmax over the positions of [B, t, V]
            next_token = model.generator(out).argmax(dim=1)[:, -1]
        ending = (pad_finished, early_stop, append_last)
        ys, finished, stop = end_step(ys, next_token, finished, end_symbol, *ending)
        if stop:
            break
    return ys


def begin(model, src, src_mask, start_symbol, dtype=torch.long):
    """Where greedy decoding starts: (memory [B, S, D], ys = start_symbol [B, 1], no row finished [B])."""
    memory = model.encode(src, src_mask)
    ys = torch.full((src.size(0), 1), start_symbol, dtype=dtype, device=src.device)
    return memory, ys, torch.zeros(src.size(0), dtype=torch.bool, device=src.device)


def end_step(ys, next_token, finished, end_symbol, pad_finished=True, early_stop="all", append_last=True):
    """The end of one greedy step, with the end-symbol mistakes' switches: append next_token [B]
    to ys [B, t] (finished rows padded with end_symbol); returns (ys, finished, stop now)."""
    stop = False
    if end_symbol is not None:
        if pad_finished:
            next_token = next_token.masked_fill(finished, end_symbol)
        finished = finished | (next_token == end_symbol)
        stop = early_stop != "never" and bool(finished.any() if early_stop == "any" else finished.all())
        if stop and not append_last:
            return ys, finished, True
    return torch.cat([ys, next_token[:, None].to(ys.dtype)], dim=1), finished, stop


def _batch_of_one(model, src, src_mask, max_len, start_symbol, end_symbol=None):
    """Greedy decoding written for a single sentence, as tutorials often show it: ys starts as
    [1, 1] and the next token is read with .item(). Right for B = 1; a batch makes it crash."""
    memory = model.encode(src, src_mask)
    ys = torch.full((1, 1), start_symbol, dtype=torch.long, device=src.device)
    for _ in range(max_len - 1):
        out = model.decode(memory, src_mask, ys, oracles.causal(ys.size(1), src.device))
        next_word = model.generator(out[:, -1]).argmax(dim=-1).item()
        ys = torch.cat([ys, torch.full((1, 1), next_word, dtype=torch.long, device=src.device)], dim=1)
        if next_word == end_symbol:
            break
    return ys


GREEDY_MISTAKES = core.catalogue(
    GREEDY,
    {
        "float tokens": lambda *a, **k: _greedy_variant(*a, **k, dtype=DTYPE),
        "written for a batch of one": _batch_of_one,
    },
    variant=_greedy_variant,
)


def greedy_case(seed: int, batch=GREEDY_B, t_src=GREEDY_T_SRC, src_vocab=GREEDY_SRC_VOCAB,
                vocab=GREEDY_VOCAB, d_model=GREEDY_D, generator=None):  # fmt: skip
    """A stand-in model and a source batch [B, T_src] whose last row ends in padding (id 0)."""
    model = StandInModel(seed, src_vocab, vocab, d_model).eval()
    generator = generator or torch.Generator().manual_seed(seed + 1)
    src = torch.randint(1, src_vocab, (batch, t_src), generator=generator)
    src[-1, t_src - max(1, t_src // 3) :] = 0
    src = src.to(DEVICE)
    return model, src, (src != 0)[:, None, None, :]


def run_greedy(fn, model, src, src_mask, max_len, start_symbol, end_symbol=None) -> torch.Tensor:
    """The learner's tokens, decoded from ``model`` put in train mode: no model of the checks drops
    anything, so its tokens are the same in either mode, and greedy_decode must leave the mode as
    it found it. When they crash, or come back as one row, for a batch of B > 1 sources, and the
    first source alone gives the right row, the loop was written for a batch of one."""
    inputs = {"model": model, "src": src, "src_mask": src_mask, "max_len": max_len}
    inputs |= {"start_symbol": start_symbol, "end_symbol": end_symbol}
    was_training = model.training
    model.train()
    try:
        out = core.output(GREEDY, fn, inputs)
        switched = [name or "model" for name, part in model.named_modules() if not part.training]
    except core.CheckFailure as failure:
        crash = core.crash_of(failure)
        if crash is None or src.size(0) == 1:
            raise
        if _right_for_one(fn, model, src, src_mask, max_len, start_symbol, end_symbol):
            raise core.CheckFailure(
                _batch_of_one_message(src.size(0), f"raised {type(crash).__name__}")
            ) from crash
        raise
    finally:
        model.train(was_training)
    if switched:
        mistake = core.named(GREEDY_MISTAKES, "model put in eval mode")
        raise core.CheckFailure(
            f"{GREEDY}: handed a model in train mode, it returned with {switched[0]} in eval mode: "
            f"{mistake.said()}. {mistake.hint}"
        )
    if out.dim() == 2 and out.size(0) == 1 < src.size(0):
        if _right_for_one(fn, model, src, src_mask, max_len, start_symbol, end_symbol):
            raise core.CheckFailure(_batch_of_one_message(src.size(0), "returned one row"))
    return out


def _right_for_one(fn, model, src, src_mask, max_len, start_symbol, end_symbol) -> bool:
    """Whether ``fn`` decodes the first source alone (B = 1) as the step-by-step oracle does."""
    one = (model, src[:1], src_mask[:1], max_len, start_symbol, end_symbol)
    try:
        with torch.no_grad(), exact_matmul():
            out = fn(*one)
    except Exception:  # noqa: BLE001 - it fails for one source too: nothing to name
        return False
    return isinstance(out, torch.Tensor) and _same_tokens(out, step_by_step(*one))


def _batch_of_one_message(batch: int, what: str) -> str:
    mistake = core.named(GREEDY_MISTAKES, "written for a batch of one")
    return (
        f"{GREEDY} {what} for a batch of B = {batch} sources, and decodes the first one right when it "
        f"is alone: {mistake.said()}. {mistake.hint}"
    )


def _greedy_message(mistakes, actual):
    for mistake, output in mistakes:
        if isinstance(output, torch.Tensor) and _same_tokens(actual, output):
            return mistake.message(GREEDY)
    return None


def compare_greedy(
    fn, model, src, src_mask, max_len, start_symbol, end_symbol=None, expected: Expected | None = None
) -> None:
    """The learner's tokens against ``expected()`` (default: the step-by-step oracle), computed after
    the learner's call, naming a mistake."""
    args = (model, src, src_mask, max_len, start_symbol, end_symbol)
    out = run_greedy(fn, *args)
    expected = step_by_step(*args) if expected is None else expected()
    if _same_tokens(out, expected):
        return
    wrong = core.mistake_outputs(GREEDY_MISTAKES, *args)
    if end_symbol is not None:  # the mistakes about end_symbol first: the others show without it
        wrong = sorted(wrong, key=lambda pair: pair[0].name not in END_MISTAKES)
    message = _greedy_message(wrong, out)
    if message:
        raise core.CheckFailure(message)
    if out.is_floating_point():
        raise core.CheckFailure(core.named(GREEDY_MISTAKES, "float tokens").message(GREEDY))
    core.expect_dtype(GREEDY, "the output", out, torch.long)
    core.expect_shape(GREEDY, "the output", out, TOKENS, expected.shape)
    core.expect_close(GREEDY, "the output", out, expected, TOKENS)


def check_greedy_shapes(fn) -> None:
    """Long[B, max_len] without end_symbol, on the source's device, starting with start_symbol."""
    model, src, src_mask = greedy_case(VISIBLE_SEED)
    args = (model, src, src_mask, GREEDY_MAX_LEN, START)
    out = run_greedy(fn, *args)
    if out.is_floating_point():
        raise core.CheckFailure(core.named(GREEDY_MISTAKES, "float tokens").message(GREEDY))
    expect_max_len_tokens(GREEDY, GREEDY_MISTAKES, out, (GREEDY_B, GREEDY_MAX_LEN), src.device)


def expect_max_len_tokens(exercise: str, mistakes, out, shape: tuple[int, int], device) -> None:
    """A greedy decoding without end_symbol: Long[B, max_len] = ``shape`` on ``device``, every row
    starting with START; max_len + 1 tokens is the catalogued "one token too many"."""
    core.expect_dtype(exercise, "the output", out, torch.long)
    if tuple(out.shape) == (shape[0], shape[1] + 1):
        raise core.CheckFailure(core.named(mistakes, "one token too many").message(exercise))
    core.expect_shape(exercise, "the output (no end_symbol: max_len tokens per row)", out, TOKENS, shape)
    core.expect_device(exercise, "the output", out, device)
    if not bool((out[:, 0] == START).all()):
        raise core.CheckFailure(
            f"{exercise}: every row must begin with start_symbol = {START}, "
            f"got first column {out[:, 0].tolist()}"
        )
    core.passed(
        f"{exercise} returns Long{TOKENS} = [{shape[0]}, {shape[1]}] (max_len tokens), "
        "starting with start_symbol"
    )


def check_greedy_values(fn) -> None:
    """Without end_symbol: the same tokens as a step-by-step argmax over the last position."""
    model, src, src_mask = greedy_case(VISIBLE_SEED)
    compare_greedy(fn, model, src, src_mask, GREEDY_MAX_LEN, START)
    core.passed(
        f"{GREEDY} picks the argmax of the last position at every step (a stand-in model, B = {GREEDY_B})"
    )


def check_greedy_end_symbol(fn) -> None:
    """With end_symbol: finished rows keep producing it, and decoding stops when all rows have."""
    model, src, src_mask = greedy_case(VISIBLE_SEED)
    compare_greedy(fn, model, src, src_mask, GREEDY_MAX_LEN, START, VISIBLE_END)
    out = step_by_step(model, src, src_mask, GREEDY_MAX_LEN, START, VISIBLE_END)
    core.passed(
        f"{GREEDY} with end_symbol = {VISIBLE_END}: finished rows are padded with it, and decoding "
        f"stops after {out.size(1)} of max_len = {GREEDY_MAX_LEN} tokens"
    )


def _same_tokens(a, b) -> bool:
    return a.dtype == b.dtype and a.shape == b.shape and torch.equal(a, b.to(a.device))


END_MISTAKES = {
    "end_symbol ignored",
    "finished rows not padded",
    "no early stop",
    "stops when any row ends",
    "last end_symbol dropped",
}


CATALOGUE = {GREEDY: GREEDY_MISTAKES}
