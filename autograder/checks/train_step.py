"""Checks for lesson 10's train_step(model, batch, optimizer, pad_id, smoothing=0.0, scheduler=None),
and for its training loop, train_loop (at the end of this file), which takes the same steps.

One step of teacher-forced training: model.train(); the loss of
model.generator(model(src, tgt_in, src_mask, tgt_mask)) against tgt_out (padding ignored,
label smoothing); zero_grad, backward, optimizer.step(), then scheduler.step(); the loss as a
Python float.

The check builds the learner's own Transformer (``model_class``), an ``optim.SGD`` on its
parameters and an ``optim.lr_scheduler.StepLR`` (gamma 0.5) with the notebook's ``optim``, loads
known weights into the model by the lesson's names, calls train_step twice on a padded batch,
and reads back what can be read as data: the returned losses, the model's mode, its weights
and the learning rate. Under the judge (autograder/engine/judge.py) the model, the optimizer and the
scheduler are all made in the learner's kernel, next to train_step, so that backward and the
optimizer work there; the judge only reads the results.

The oracle is computed here: PyTorch's nn.TransformerEncoder / nn.TransformerDecoder between
the paper's embeddings (``StandIn``, with the same initial weights), F.cross_entropy with
ignore_index and label_smoothing, backward and the same SGD and StepLR. Each known mistake is
the train_step written with one thing wrong (``_variant``), run on a fresh StandIn with the same
optimizer, so its outcome (losses, mode, weights, learning rate) can be compared with the
learner's: the first stage where the learner's outcome differs from the oracle's names the
mistake that matches it there.

Which stage shows which mistake: the returned value's type (a tensor), the model's mode
(model.train() missing), the first loss (tgt_in, smoothing, padding, the generator, the
decoder's input or masks), the weights after the first call (no update at all, the scheduler
stepped first), the learning rate after it (the scheduler not stepped), and the second call's
weights (gradients accumulated: zero_grad missing).
"""

import copy
import math
import numbers
import warnings
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from autograder.checks import core, oracles
from autograder.checks.device import DEVICE, DTYPE, exact_matmul
from autograder.checks.output_layer import load_transformer, transformer_args, transformer_module

TRAIN_STEP = "train_step"
SIGNATURE = "train_step(model, batch, optimizer, pad_id, smoothing=0.0, scheduler=None)"
# the visible check's sizes: a small model, one layer, a batch whose last rows are padded
V_SRC, V_TGT, D_MODEL, N_HEADS, D_FF, N_LAYERS, MAX_LEN = 11, 11, 16, 2, 32, 1, 20
B, T_SRC, T_TGT = 3, 6, 5
PAD, LR, GAMMA, SMOOTHING = 0, 0.5, 0.5, 0.1
SEED = 10


# ---------------------------------------------------------------------------------------
# The stand-in: PyTorch's own modules behind the course's interface
# ---------------------------------------------------------------------------------------


class _Generator(nn.Module):
    def __init__(self, projection: nn.Linear):
        super().__init__()
        self.proj = projection

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.log_softmax(self.proj(x), dim=-1)


def _key_padding(mask: torch.Tensor | None) -> torch.Tensor | None:
    """Our padding mask Bool[B, 1, 1, T] (True = real) -> PyTorch's Bool[B, T] (True = padding)."""
    return None if mask is None else oracles.torch_key_padding_mask(mask)


class StandIn(nn.Module):
    """The course's Transformer interface, forward(src, tgt, src_mask, tgt_mask) -> [B, T, D] and
    generator, made of PyTorch's nn.TransformerEncoder / nn.TransformerDecoder between the paper's
    embeddings (nn.Embedding * sqrt(D) + the sinusoidal table), with seeded random weights."""

    def __init__(self, args: dict, generator: torch.Generator):
        super().__init__()
        d_model, n_heads, d_ff, n_layers = (args[k] for k in ("d_model", "n_heads", "d_ff", "n_layers"))
        self.encoder, self.decoder = (
            oracles.torch_stack(
                oracles.torch_layer(is_decoder, d_model, n_heads, d_ff, seed=None), n_layers, seed=generator
            )
            for is_decoder in (False, True)
        )
        self.src_lut = nn.Embedding(args["src_vocab"], d_model, device=DEVICE, dtype=DTYPE)
        self.tgt_lut = nn.Embedding(args["tgt_vocab"], d_model, device=DEVICE, dtype=DTYPE)
        projection = nn.Linear(d_model, args["tgt_vocab"], device=DEVICE, dtype=DTYPE)
        for part in (self.src_lut, self.tgt_lut, projection):
            oracles.randomize_(part, generator)
        self.generator = _Generator(projection)
        self.register_buffer("pe", oracles.sinusoidal_table(args["max_len"], d_model).to(DEVICE))
        self.n_heads, self.scale = n_heads, math.sqrt(d_model)

    def forward(self, src, tgt, src_mask, tgt_mask):
        memory = self.encoder(
            self.src_lut(src) * self.scale + self.pe[: src.size(1)],
            src_key_padding_mask=_key_padding(src_mask),
        )
        attn_mask = None
        if tgt_mask is not None:  # ours [B, 1, T, T] (True = may attend) -> PyTorch's [B * h, T, T]
            mask = tgt_mask.expand(tgt.size(0), 1, tgt.size(1), tgt.size(1))
            attn_mask = oracles.torch_attn_mask(mask.repeat_interleave(self.n_heads, dim=1).flatten(0, 1))
        return self.decoder(
            self.tgt_lut(tgt) * self.scale + self.pe[: tgt.size(1)],
            memory,
            tgt_mask=attn_mask,
            memory_key_padding_mask=_key_padding(src_mask),
        )

    def course_state(self) -> dict[str, torch.Tensor]:
        """Its weights under the lesson's names (src_embed, tgt_embed, positional, encoder, ...)."""
        return {
            "src_embed.lut.weight": self.src_lut.weight.detach().clone(),
            "tgt_embed.lut.weight": self.tgt_lut.weight.detach().clone(),
            "positional.pe": self.pe.clone(),
            **oracles.prefixed("encoder", oracles.stack_state(self.encoder)),
            **oracles.prefixed("decoder", oracles.stack_state(self.decoder)),
            "generator.proj.weight": self.generator.proj.weight.detach().clone(),
            "generator.proj.bias": self.generator.proj.bias.detach().clone(),
        }


# ---------------------------------------------------------------------------------------
# The oracle and the known mistakes
# ---------------------------------------------------------------------------------------


def oracle_step(model, batch, optimizer, pad_id, smoothing=0.0, scheduler=None) -> float:
    """The check's own train step: F.cross_entropy with ignore_index and label_smoothing."""
    model.train()
    log_probs = model.generator(model(batch["src"], batch["tgt_in"], batch["src_mask"], batch["tgt_mask"]))
    loss = F.cross_entropy(
        log_probs.reshape(-1, log_probs.size(-1)),
        batch["tgt_out"].reshape(-1),
        ignore_index=pad_id,
        label_smoothing=smoothing,
    )
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    if scheduler is not None:
        scheduler.step()
    return loss.item()


def _loss(log_probs, target, pad_id, smoothing, ignore_padding=True):
    """The label-smoothed negative log-likelihood, as the lesson's sequence_loss computes it."""
    nll = -log_probs.gather(-1, target.unsqueeze(-1)).squeeze(-1)  # [B, T]
    loss = (1.0 - smoothing) * nll + smoothing * -log_probs.mean(dim=-1)
    keep = target != pad_id if ignore_padding else torch.ones_like(target, dtype=torch.bool)
    return loss[keep].sum() / keep.sum()


def _variant(
    model, batch, optimizer, pad_id, smoothing=0.0, scheduler=None, *,
    train=True, decoder_input="tgt_in", masks=True, generator=True, target="tgt_out",
    use_smoothing=True, ignore_padding=True, zero_grad="before_backward", step=True,
    scheduler_first=False, use_scheduler=True, item=True, clip=None,
):  # fmt: skip
    """train_step with one thing done wrong, as a learner might write it."""
    if train:
        model.train()
    src_mask, tgt_mask = (batch["src_mask"], batch["tgt_mask"]) if masks else (None, None)
    states = model(batch["src"], batch[decoder_input], src_mask, tgt_mask)  # [B, T, D]
    log_probs = model.generator(states) if generator else states
    loss = _loss(log_probs, batch[target], pad_id, smoothing if use_smoothing else 0.0, ignore_padding)
    if zero_grad == "before_backward":
        optimizer.zero_grad()
    loss.backward()
    if zero_grad == "after_backward":
        optimizer.zero_grad()
    if clip is not None:  # the loop's option, written into the one plain step
        torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
    if scheduler is not None and use_scheduler and scheduler_first:
        scheduler.step()
    if step:
        optimizer.step()
    if scheduler is not None and use_scheduler and not scheduler_first:
        scheduler.step()
    return loss.item() if item else loss


MISTAKES = core.catalogue(TRAIN_STEP, variant=_variant)


# ---------------------------------------------------------------------------------------
# One case: a model, a batch, SGD and StepLR; what two calls of a train_step leave behind
# ---------------------------------------------------------------------------------------


@dataclass
class Case:
    """Everything a run needs: the model's sizes, its initial weights (a StandIn), the batch."""

    args: dict
    stand_in: StandIn
    batch: dict[str, torch.Tensor]
    pad_id: int
    lr: float = LR
    gamma: float = GAMMA
    smoothing: float = SMOOTHING
    use_scheduler: bool = True


@dataclass
class Outcome:
    """What a train_step left after each of two calls: returned values, mode, weights, lr."""

    returned: list
    training: list[bool]
    weights: list[dict[str, torch.Tensor]]
    rates: list[float | None]


def make_case(args: dict, batch: int, t_src: int, t_tgt: int, pad_id: int, generator: torch.Generator,
              **settings) -> Case:  # fmt: skip
    """A StandIn with seeded weights and a batch in make_batch's format: src [B, T_src] and the
    target <s> y ... </s> padded with pad_id (the last rows shorter), tgt_in / tgt_out shifted."""
    stand_in = StandIn(args, generator)
    return Case(
        args, stand_in, random_batch(args, batch, t_src, t_tgt, pad_id, generator), pad_id, **settings
    )


def random_batch(args: dict, batch: int, t_src: int, t_tgt: int, pad_id: int,
                 generator: torch.Generator) -> dict[str, torch.Tensor]:  # fmt: skip
    """A batch in make_batch's format, its rows after the first padded with pad_id at the end."""
    real = [t for t in range(args["tgt_vocab"]) if t != pad_id]
    src_real = [t for t in range(args["src_vocab"]) if t != pad_id]

    def tokens(choices, *shape):
        index = torch.randint(0, len(choices), shape, generator=generator)
        return torch.tensor(choices)[index]

    src = tokens(src_real, batch, t_src)
    target = tokens(real, batch, t_tgt + 1)  # <s> y_1 ... y_n </s>
    for row in range(1, batch):  # every row but the first ends early (padding after it)
        src[row, t_src - min(row, t_src - 1) :] = pad_id
        target[row, t_tgt + 1 - min(row, t_tgt - 1) :] = pad_id  # <s> and y_1 stay
    tgt_in, tgt_out = target[:, :-1].to(DEVICE), target[:, 1:].to(DEVICE)
    src = src.to(DEVICE)
    causal = oracles.causal(t_tgt, DEVICE)
    return {
        "src": src,
        "src_mask": (src != pad_id)[:, None, None, :],
        "tgt_in": tgt_in,
        "tgt_out": tgt_out,
        "tgt_mask": (tgt_in != pad_id)[:, None, None, :] & causal,
    }


def _arguments(case: Case, model, optim) -> tuple:
    optimizer = optim.SGD(model.parameters(), lr=case.lr)
    scheduler = (
        optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=case.gamma) if case.use_scheduler else None
    )
    return optimizer, scheduler


def _rate(scheduler, optimizer) -> float:
    if scheduler is not None:
        return float(scheduler.get_last_lr()[0])
    return float(optimizer.param_groups[0]["lr"])


def _weights(model, names) -> dict[str, torch.Tensor]:
    state = model.state_dict()
    return {name: state[name].detach().clone() for name in names}


def _two_calls(call, case: Case, model, optim, read, names) -> Outcome:
    """``call(*arguments)`` twice on ``model`` with a fresh SGD (and StepLR); record the outcome."""
    optimizer, scheduler = _arguments(case, model, optim)
    outcome = Outcome([], [], [], [])
    for _ in range(2):
        args = (model, case.batch, optimizer, case.pad_id, case.smoothing)
        with torch.enable_grad():
            returned = call(*args, scheduler) if case.use_scheduler else call(*args)
        outcome.returned.append(returned)
        outcome.training.append(bool(model.training))
        outcome.weights.append(read(model, names))
        outcome.rates.append(_rate(scheduler, optimizer))
    return outcome


def _stand_in_outcome(fn, case: Case) -> Outcome:
    """``fn`` run on a copy of the case's StandIn (its weights under the lesson's names)."""
    model = copy.deepcopy(case.stand_in).eval()

    def read(model, names):
        return {name: value for name, value in model.course_state().items() if name != "positional.pe"}

    with exact_matmul(), oracles.fastpath_disabled():
        return _two_calls(fn, case, model, torch.optim, read, None)


def expected_outcome(case: Case) -> Outcome:
    return _stand_in_outcome(oracle_step, case)


def mistake_outcomes(case: Case) -> list[tuple[core.Mistake, Outcome | None]]:
    """Each known mistake with its outcome on this case (None when it crashes here)."""
    outcomes = []
    for mistake in MISTAKES:
        try:
            with warnings.catch_warnings():  # PyTorch's warning about the scheduler's order: expected
                warnings.simplefilter("ignore")
                outcomes.append((mistake, _stand_in_outcome(mistake.compute, case)))
        except Exception:  # noqa: BLE001 - a mistake that crashes here matches nothing
            outcomes.append((mistake, None))
    return outcomes


# ---------------------------------------------------------------------------------------
# Comparing the learner's outcome with the oracle's, stage by stage
# ---------------------------------------------------------------------------------------


def _number(value) -> float:
    """A returned loss as a number (a one-element tensor's value), NaN when it is none."""
    if isinstance(value, torch.Tensor):
        return float(value.detach().reshape(-1)[0]) if value.numel() == 1 else math.nan
    return float(value) if isinstance(value, numbers.Real) else math.nan


def _same_loss(a, b) -> bool:
    return math.isclose(_number(a), _number(b), rel_tol=1e-7, abs_tol=1e-9)


def _same_weights(a: dict, b: dict) -> bool:
    return all(core.same(a[name], b[name]) for name in b)


def _largest_change(a: dict, b: dict) -> tuple[str, float]:
    """The parameter where ``a`` and ``b`` differ most, and by how much."""
    gaps = {name: float((a[name].double() - b[name].double().to(a[name].device)).abs().max()) for name in b}
    name = max(gaps, key=gaps.get)
    return name, gaps[name]


def _stages(case: Case):
    """(what, how to compare two outcomes there) in the order the check looks."""
    return [
        ("returned_1", lambda o: o.returned[0], _same_loss),
        ("training", lambda o: o.training[0], lambda a, b: a == b),
        ("weights_1", lambda o: o.weights[0], _same_weights),
        ("rate_1", lambda o: o.rates[0], lambda a, b: math.isclose(a, b, rel_tol=1e-9)),
        ("returned_2", lambda o: o.returned[1], _same_loss),
        ("weights_2", lambda o: o.weights[1], _same_weights),
        ("rate_2", lambda o: o.rates[1], lambda a, b: math.isclose(a, b, rel_tol=1e-9)),
    ]


def _matching(case: Case, stage, actual) -> list[core.Mistake]:
    """The known mistakes whose outcome at ``stage`` is the learner's (and right before it)."""
    _, get, equal = stage
    found = []
    for mistake, outcome in mistake_outcomes(case):
        if outcome is None:
            continue
        try:
            if equal(actual, get(outcome)):
                found.append(mistake)
        except (KeyError, RuntimeError, TypeError, ValueError):
            continue
    return found


def _scaled_update(case: Case, actual: dict, expected: dict) -> bool:
    """Whether the learner's first update is the oracle's times one factor below 1, the same for
    every parameter: the gradients were scaled down together, as clipping their norm does."""
    start = case.stand_in.course_state()
    moved = torch.cat([(actual[n].double().cpu() - start[n].double().cpu()).flatten() for n in expected])
    wanted = torch.cat([(expected[n].double().cpu() - start[n].double().cpu()).flatten() for n in expected])
    factor = float(moved @ wanted / (wanted @ wanted))
    return 0.0 < factor < 1.0 - 1e-6 and torch.allclose(moved, factor * wanted, rtol=1e-5, atol=1e-9)


def _named(mistakes: list[core.Mistake]) -> str:
    if len(mistakes) == 1:
        return mistakes[0].message(TRAIN_STEP)
    listed = " Or: ".join(f"{m.name}. {m.hint}" for m in mistakes)
    return f"{TRAIN_STEP}: your result matches {len(mistakes)} known mistakes that look alike here: {listed}"


def _fallback(case: Case, stage: str, actual, expected) -> str:
    """A message for a difference that no known mistake explains."""
    recipe = (
        "model.train(); log_probs = model.generator(model(src, tgt_in, src_mask, tgt_mask)); "
        "loss = sequence_loss(log_probs, tgt_out, pad_id, smoothing); optimizer.zero_grad(); "
        "loss.backward(); optimizer.step(); then scheduler.step() if a scheduler is given; return loss.item()"
    )
    if stage.startswith("returned"):
        which = "first" if stage.endswith("1") else "second"
        return (
            f"{TRAIN_STEP}: the {which} call returned the loss {float(actual):.8g}, expected {expected:.8g} "
            f"(F.cross_entropy with ignore_index=pad_id and label_smoothing={case.smoothing} on the same "
            f"model and batch). Check the loss: {recipe}."
        )
    if stage.startswith("weights"):
        which = "first" if stage.endswith("1") else "second"
        name, gap = _largest_change(actual, expected)
        return (
            f"{TRAIN_STEP}: after the {which} call the weights are not those of one SGD step (lr = "
            f"{case.lr}) on the returned loss: {name} is off by up to {gap:.3g}. The order should be: "
            f"{recipe}."
        )
    if stage.startswith("rate"):
        return (
            f"{TRAIN_STEP}: after {'one call' if stage.endswith('1') else 'two calls'} the learning rate is "
            f"{actual:.6g}, expected {expected:.6g} (StepLR with gamma = {case.gamma}: step the scheduler "
            "exactly once per call, after optimizer.step())."
        )
    return f"{TRAIN_STEP}: {stage} differs from the oracle's. Write it as: {recipe}."


def compare_train_step(fn, model_class, optim, case: Case) -> Outcome:
    """The learner's train_step on the learner's model (loaded with the case's weights), against the
    oracle; the first stage that differs fails, naming the known mistake that matches there."""
    core.expect_parameter(TRAIN_STEP, fn, "scheduler", SIGNATURE)
    model = transformer_module(model_class, case.args)
    state = case.stand_in.course_state()
    load_transformer(model, state)
    names = [name for name in state if name != "positional.pe"]

    def learner(*args):
        return core.call(TRAIN_STEP, fn, *args)

    outcome = _two_calls(learner, case, model, optim, _weights, names)
    expected = expected_outcome(case)
    for returned in outcome.returned:
        if isinstance(returned, torch.Tensor):
            raise core.CheckFailure(core.named(MISTAKES, "loss returned as a tensor").message(TRAIN_STEP))
        if not isinstance(returned, numbers.Real) or isinstance(returned, bool):
            raise core.CheckFailure(
                f"{TRAIN_STEP}: expected the loss as a Python float (return loss.item()), got "
                f"{type(returned).__name__}"
            )
    for stage in _stages(case):
        what, get, equal = stage
        actual, wanted = get(outcome), get(expected)
        if equal(actual, wanted):
            continue
        mistakes = _matching(case, stage, actual)
        if not mistakes and what == "weights_1" and _scaled_update(case, actual, wanted):
            mistakes = [core.named(MISTAKES, "gradients clipped in train_step")]
        if mistakes:
            raise core.CheckFailure(_named(mistakes))
        raise core.CheckFailure(_fallback(case, what, actual, wanted))
    return expected


def visible_case() -> Case:
    args = transformer_args(V_SRC, V_TGT, D_MODEL, N_HEADS, D_FF, N_LAYERS, MAX_LEN)
    return make_case(args, B, T_SRC, T_TGT, PAD, torch.Generator().manual_seed(SEED))


def check_train_step(fn, model_class, optim) -> None:
    """Two calls on a padded batch with SGD and StepLR: the returned losses, model.train(), the
    weights after each call and the learning rate, against PyTorch's modules and F.cross_entropy."""
    case = visible_case()
    expected = compare_train_step(fn, model_class, optim, case)
    core.passed(
        f"{TRAIN_STEP}: model.train(), the loss ({expected.returned[0]:.4f}, padding ignored, smoothing "
        f"{case.smoothing}) returned as a float, one SGD step per call with fresh gradients, the scheduler "
        "stepped after the optimizer (the same as F.cross_entropy on PyTorch's own Transformer)"
    )


# ---------------------------------------------------------------------------------------
# train_loop: one step per batch, with optional gradient clipping
# ---------------------------------------------------------------------------------------

TRAIN_LOOP = "train_loop"
LOOP_SIGNATURE = "train_loop(model, batches, optimizer, pad_id, smoothing=0.0, scheduler=None, clip=None)"
N_BATCHES, LOOP_SEED = 3, 11
# a clip written by hand, without clip_grad_norm_'s 1e-6 beside the norm, is right: its weights
# differ by about 1e-8 after three steps, a known mistake's by more than 1e-3
LOOP_RTOL, LOOP_ATOL = 1e-6, 1e-7


def oracle_loop(model, batches, optimizer, pad_id, smoothing=0.0, scheduler=None, clip=None) -> list[float]:
    """The check's own loop: oracle_step's step, with clip_grad_norm_ between backward and step."""
    losses = []
    for batch in batches:
        model.train()
        log_probs = model.generator(
            model(batch["src"], batch["tgt_in"], batch["src_mask"], batch["tgt_mask"])
        )
        loss = F.cross_entropy(
            log_probs.reshape(-1, log_probs.size(-1)),
            batch["tgt_out"].reshape(-1),
            ignore_index=pad_id,
            label_smoothing=smoothing,
        )
        optimizer.zero_grad()
        loss.backward()
        if clip is not None:
            nn.utils.clip_grad_norm_(model.parameters(), clip)
        optimizer.step()
        if scheduler is not None:
            scheduler.step()
        losses.append(loss.item())
    return losses


def _loop_variant(
    model, batches, optimizer, pad_id, smoothing=0.0, scheduler=None, clip=None, *,
    train=True, zero_grad=True, order="backward_then_step", scheduler_each="step", clip_how="norm",
    clip_when="before_step", item=True,
):  # fmt: skip
    """train_loop with one thing done wrong, as a learner might write it."""

    def clipped() -> None:
        if clip is None:
            return
        if clip_how == "value":
            nn.utils.clip_grad_value_(model.parameters(), clip)
        else:
            nn.utils.clip_grad_norm_(model.parameters(), clip)

    losses = []
    for batch in batches:
        if train:
            model.train()
        states = model(batch["src"], batch["tgt_in"], batch["src_mask"], batch["tgt_mask"])  # [B, T, D]
        loss = _loss(model.generator(states), batch["tgt_out"], pad_id, smoothing)
        if zero_grad:
            optimizer.zero_grad()
        if order == "step_then_backward":
            optimizer.step()
            loss.backward()
        else:
            loss.backward()
            if clip_when == "before_step":
                clipped()
            optimizer.step()
            if clip_when == "after_step":
                clipped()
        if scheduler is not None and scheduler_each == "step":
            scheduler.step()
        losses.append(loss.item() if item else loss)
    if scheduler is not None and scheduler_each == "call":
        scheduler.step()
    return losses


LOOP_MISTAKES = core.catalogue(TRAIN_LOOP, variant=_loop_variant)


@dataclass
class LoopCase:
    """A StandIn's initial weights, the batches in order, SGD's rate, StepLR's gamma, the clip."""

    args: dict
    stand_in: StandIn
    batches: list[dict[str, torch.Tensor]]
    pad_id: int
    clip: float | None = None
    lr: float = LR
    gamma: float = GAMMA
    smoothing: float = SMOOTHING
    use_scheduler: bool = True


@dataclass
class LoopOutcome:
    """What one call of a training loop left: its returned value, the mode, the weights, the rate."""

    returned: object
    training: bool
    weights: dict[str, torch.Tensor]
    rate: float


def first_gradients(case: LoopCase) -> list[torch.Tensor]:
    """The oracle's gradients on the first batch, from the initial weights."""
    model = copy.deepcopy(case.stand_in)
    batch = case.batches[0]
    with exact_matmul(), oracles.fastpath_disabled(), torch.enable_grad():
        model.train()
        log_probs = model.generator(
            model(batch["src"], batch["tgt_in"], batch["src_mask"], batch["tgt_mask"])
        )
        vocab = log_probs.size(-1)
        F.cross_entropy(log_probs.reshape(-1, vocab), batch["tgt_out"].reshape(-1), ignore_index=case.pad_id,
                        label_smoothing=case.smoothing).backward()  # fmt: skip
    return [p.grad.detach().flatten() for p in model.parameters() if p.grad is not None]


def make_loop_case(args: dict, n_batches: int, batch: int, t_src: int, t_tgt: int, pad_id: int,
                   generator: torch.Generator, clip: bool, **settings) -> LoopCase:  # fmt: skip
    """A StandIn and ``n_batches`` batches. With ``clip``, a clip half the first gradient's largest
    entry: below the gradients' norm (so clipping changes the first step) and below one entry (so
    clipping each entry by value is not the same as leaving them alone)."""
    stand_in = StandIn(args, generator)
    batches = [random_batch(args, batch, t_src, t_tgt, pad_id, generator) for _ in range(n_batches)]
    case = LoopCase(args, stand_in, batches, pad_id, **settings)
    if clip:
        largest = max(float(g.abs().max()) for g in first_gradients(case))
        case.clip = float(f"{largest / 2:.3g}")
    return case


def _run_loop(call, case: LoopCase, model, optim, read, names) -> LoopOutcome:
    """``call`` once on ``model`` with a fresh SGD (and StepLR) over the case's batches, handed
    over as a generator, as the capstone's training does (it draws each batch when asked)."""
    optimizer, scheduler = _arguments(case, model, optim)
    batches = (batch for batch in case.batches)
    with torch.enable_grad():
        returned = call(model, batches, optimizer, case.pad_id, smoothing=case.smoothing,
                        scheduler=scheduler, clip=case.clip)  # fmt: skip
    return LoopOutcome(returned, bool(model.training), read(model, names), _rate(scheduler, optimizer))


def _stand_in_loop(fn, case: LoopCase) -> LoopOutcome:
    model = copy.deepcopy(case.stand_in).eval()

    def read(model, names):
        return {name: value for name, value in model.course_state().items() if name != "positional.pe"}

    with exact_matmul(), oracles.fastpath_disabled():
        return _run_loop(fn, case, model, torch.optim, read, None)


def _loop_outcomes(case: LoopCase) -> list[tuple[core.Mistake, LoopOutcome | None]]:
    outcomes = []
    for mistake in LOOP_MISTAKES:
        try:
            with warnings.catch_warnings():  # PyTorch's warning about the scheduler's order: expected
                warnings.simplefilter("ignore")
                outcomes.append((mistake, _stand_in_loop(mistake.compute, case)))
        except Exception:  # noqa: BLE001 - a mistake that crashes here matches nothing
            outcomes.append((mistake, None))
    return outcomes


def _same_losses(a, b) -> bool:
    return len(a) == len(b) and all(
        math.isclose(_number(x), _number(y), rel_tol=LOOP_RTOL, abs_tol=1e-9)
        for x, y in zip(a, b, strict=True)
    )


def _close_weights(a: dict, b: dict) -> bool:
    return all(
        a[n].shape == b[n].shape
        and torch.allclose(
            a[n].double(), b[n].double().to(a[n].device), rtol=LOOP_RTOL, atol=LOOP_ATOL
        )  # fmt: skip
        for n in b
    )


LOOP_STAGES = [
    ("training", lambda o: o.training, lambda a, b: a == b),
    ("losses", lambda o: o.returned, _same_losses),
    ("weights", lambda o: o.weights, _close_weights),
    ("rate", lambda o: o.rate, lambda a, b: math.isclose(a, b, rel_tol=1e-9)),
]


def _loop_fallback(case: LoopCase, stage: str, actual, expected) -> str:
    """A message for a difference that no known mistake explains."""
    step = (
        "model.train(); the loss of model.generator(model(src, tgt_in, src_mask, tgt_mask)) against "
        "tgt_out; optimizer.zero_grad(); loss.backward(); then, when clip is not None, "
        "nn.utils.clip_grad_norm_(model.parameters(), clip); optimizer.step(); scheduler.step() when "
        "there is one; append loss.item()"
    )
    clip = f"clip = {case.clip}" if case.clip is not None else "clip = None"
    if stage == "losses":
        k = next(
            i for i, (a, e) in enumerate(zip(actual, expected, strict=True)) if not _same_losses([a], [e])
        )
        return (
            f"{TRAIN_LOOP}: the loss of step {k + 1} is {_number(actual[k]):.8g}, expected "
            f"{expected[k]:.8g} (the same steps taken with PyTorch's own modules, SGD lr = {case.lr}, "
            f"{clip}); the steps before it are right. Each step, for each batch in turn: {step}."
        )
    if stage == "weights":
        name, gap = _largest_change(actual, expected)
        return (
            f"{TRAIN_LOOP}: every loss is right, but after the last step the weights are not the expected "
            f"ones ({clip}): {name} is off by up to {gap:.3g}. Each step: {step}."
        )
    if stage == "rate":
        return (
            f"{TRAIN_LOOP}: after {len(case.batches)} batches the learning rate is {actual:.6g}, expected "
            f"{expected:.6g} (StepLR with gamma = {case.gamma}: step the scheduler once per batch, after "
            "optimizer.step())."
        )
    return f"{TRAIN_LOOP}: {stage} differs from the oracle's. Each step: {step}."


def _expect_losses_list(returned, n: int) -> None:
    """``returned`` is a list (or tuple) of ``n`` Python numbers: the loss of each step."""
    if not isinstance(returned, list | tuple):
        raise core.CheckFailure(
            f"{TRAIN_LOOP}: expected a list with the loss of every step (Python floats), got "
            f"{type(returned).__name__}. Start with losses = [], append loss.item() after each step, and "
            "return losses."
        )
    if any(isinstance(value, torch.Tensor) for value in returned):
        raise core.CheckFailure(core.named(LOOP_MISTAKES, "loss logged as a tensor").message(TRAIN_LOOP))
    if len(returned) != n:
        raise core.CheckFailure(
            f"{TRAIN_LOOP}: {n} batches, so {n} steps, and {len(returned)} losses returned: take one step "
            "per batch, in order, and append each step's loss."
        )
    odd = [value for value in returned if not isinstance(value, numbers.Real) or isinstance(value, bool)]
    if odd:
        raise core.CheckFailure(
            f"{TRAIN_LOOP}: expected each loss as a Python float (loss.item()), got {type(odd[0]).__name__}"
        )


def compare_train_loop(fn, model_class, optim, case: LoopCase) -> LoopOutcome:
    """The learner's loop on the learner's model (loaded with the case's weights, in eval mode)
    against the oracle's; the first stage that differs fails, naming the known mistake that
    matches there."""
    for parameter in ("scheduler", "clip"):
        core.expect_parameter(TRAIN_LOOP, fn, parameter, LOOP_SIGNATURE)
    model = transformer_module(model_class, case.args)
    state = case.stand_in.course_state()
    load_transformer(model, state)
    names = [name for name in state if name != "positional.pe"]

    def learner(*args, **kwargs):
        try:
            return core.call(TRAIN_LOOP, fn, *args, **kwargs)
        except core.CheckFailure as failure:
            if isinstance(failure.__cause__, TypeError) and "generator" in str(failure.__cause__):
                raise core.CheckFailure(
                    f"{TRAIN_LOOP} raised TypeError: {failure.__cause__}. The batches come as an iterable "
                    "that may have no length and no index (the capstone draws each batch when the loop "
                    "asks for it): take them in turn with `for batch in batches:`."
                ) from failure.__cause__
            raise

    outcome = _run_loop(learner, case, model, optim, _weights, names)
    _expect_losses_list(outcome.returned, len(case.batches))
    expected = _stand_in_loop(oracle_loop, case)
    for what, get, equal in LOOP_STAGES:
        actual, wanted = get(outcome), get(expected)
        if equal(actual, wanted):
            continue
        found = [m for m, o in _loop_outcomes(case) if o is not None and equal(actual, get(o))]
        if found:
            raise core.CheckFailure(
                found[0].message(TRAIN_LOOP) if len(found) == 1 else
                f"{TRAIN_LOOP}: your result matches {len(found)} known mistakes that look alike here: "
                + " Or: ".join(f"{m.name}. {m.hint}" for m in found)
            )  # fmt: skip
        raise core.CheckFailure(_loop_fallback(case, what, actual, wanted))
    return expected


def loop_case(clip: bool) -> LoopCase:
    """The visible checks' case: the train_step check's sizes, three batches."""
    args = transformer_args(V_SRC, V_TGT, D_MODEL, N_HEADS, D_FF, N_LAYERS, MAX_LEN)
    return make_loop_case(
        args, N_BATCHES, B, T_SRC, T_TGT, PAD, torch.Generator().manual_seed(LOOP_SEED), clip
    )


def check_train_loop(fn, model_class, optim) -> None:
    """Three padded batches with SGD and StepLR, no clipping: the losses of the three steps, the
    model's mode, the weights and the learning rate after them, against PyTorch's own modules."""
    case = loop_case(clip=False)
    expected = compare_train_loop(fn, model_class, optim, case)
    losses = ", ".join(f"{loss:.4f}" for loss in expected.returned)
    core.passed(
        f"{TRAIN_LOOP}: one step per batch, the losses ({losses}) returned as floats, the weights and the "
        f"learning rate after {len(case.batches)} steps those of PyTorch's own Transformer"
    )


def check_train_loop_clip(fn, model_class, optim) -> None:
    """The same with clip set below the first step's gradient norm: clip_grad_norm_'s result."""
    case = loop_case(clip=True)
    expected = compare_train_loop(fn, model_class, optim, case)
    core.passed(
        f"{TRAIN_LOOP}: with clip = {case.clip}, the gradients' norm is clipped after backward and before "
        f"the step (the losses {', '.join(f'{loss:.4f}' for loss in expected.returned)})"
    )


CATALOGUE = {TRAIN_STEP: MISTAKES, TRAIN_LOOP: LOOP_MISTAKES}
