"""Checks for lesson 10's train_loop(model, batches, optimizer, pad_id, smoothing=0.0, scheduler=None,
clip=None): one train_step per batch, with optional gradient clipping, on the stand-in and cases of
autograder/checks/training_oracle.py."""

import copy
import functools
import math
import numbers
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from autograder.checks import core, oracles
from autograder.checks.device import exact_matmul
from autograder.checks.output_layer import load_transformer, transformer_args, transformer_module
from autograder.checks.training_oracle import (
    D_FF,
    D_MODEL,
    MAX_LEN,
    N_HEADS,
    N_LAYERS,
    PAD,
    T_SRC,
    T_TGT,
    V_SRC,
    V_TGT,
    B,
    Relaid,
    Settings,
    StandIn,
    arguments_for,
    current_rate,
    gradients_left,
    largest_change,
    loss_of,
    number,
    oracle_step,
    outcomes_of,
    random_batch,
    shifted,
    stale_gradients,
    stand_in_weights,
    telling_warnings_quoted,
    weights_of,
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
    """The check's own loop: oracle_step's step for each batch, with clip_grad_norm_ between
    backward and step."""
    return [oracle_step(model, batch, optimizer, pad_id, smoothing, scheduler, clip) for batch in batches]


def _loop_variant(
    model, batches, optimizer, pad_id, smoothing=0.0, scheduler=None, clip=None, *,
    train=True, zero_grad="before_backward", order="backward_then_step", scheduler_each="step",
    scheduler_first=False, clip_how="norm", clip_when="before_step", item=True, ignore_padding=True,
    shift_again=False,
):  # fmt: skip
    """train_loop with one thing done wrong, as a learner might write it."""

    def clipped() -> None:
        if clip is None:
            return
        if clip_how == "value":
            nn.utils.clip_grad_value_(model.parameters(), clip)
        elif clip_how == "each":  # each parameter's gradient to the norm clip on its own
            for parameter in model.parameters():
                nn.utils.clip_grad_norm_(parameter, clip)
        else:
            nn.utils.clip_grad_norm_(model.parameters(), clip)

    def scheduled(now: bool) -> None:
        if scheduler is not None and scheduler_each == "step" and now:
            scheduler.step()

    losses = []
    for batch in batches:
        if train:
            model.train()
        states = model(batch["src"], batch["tgt_in"], batch["src_mask"], batch["tgt_mask"])  # [B, T, D]
        log_probs, target = shifted(model.generator(states), batch["tgt_out"], shift_again)
        loss = loss_of(log_probs, target, pad_id, smoothing, ignore_padding)
        if zero_grad == "before_backward":
            optimizer.zero_grad()
        if order == "step_then_backward":
            optimizer.step()
            loss.backward()
        else:
            loss.backward()
            if zero_grad == "after_backward":
                optimizer.zero_grad()
            if clip_when == "before_step":
                clipped()
            scheduled(scheduler_first)
            optimizer.step()
            if clip_when == "after_step":
                clipped()
        scheduled(not scheduler_first)
        if zero_grad == "after_step":
            optimizer.zero_grad()
        losses.append(loss.item() if item else loss)
    if scheduler is not None and scheduler_each == "call":
        scheduler.step()
    return losses


LOOP_MISTAKES = core.catalogue(TRAIN_LOOP, variant=_loop_variant)
# computed on the stand-in cut into the learner's parameters (Relaid): per parameter means the
# lesson's parameters, not the stand-in's, which stacks q, k and v in one
OWN_LAYOUT_MISTAKES = ("gradients clipped per parameter",)


@dataclass(kw_only=True)
class LoopCase(Settings):
    """A StandIn's initial weights, the batches in order, the clip, and how it trains."""

    args: dict
    stand_in: StandIn
    batches: list[dict[str, torch.Tensor]]
    pad_id: int
    clip: float | None = None


@dataclass
class LoopOutcome:
    """What one call of a training loop left: its returned value, the mode, the weights, the rate."""

    returned: object
    training: bool
    weights: dict[str, torch.Tensor]
    rate: float
    gradients_left: bool = False  # whether any .grad holds a number but 0 after the call


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
    case = LoopCase(args=args, stand_in=stand_in, batches=batches, pad_id=pad_id, **settings)
    if clip:
        largest = max(float(g.abs().max()) for g in first_gradients(case))
        case.clip = float(f"{largest / 2:.3g}")
    return case


def _run_loop(call, case: LoopCase, model, optim, read, names) -> LoopOutcome:
    """``call`` once on ``model`` with a fresh SGD (and StepLR) over the case's batches, handed
    over as a generator, as the capstone's training does (it draws each batch when asked); the
    model comes with stale gradients, as after an earlier backward (``stale_gradients``)."""
    optimizer, scheduler = arguments_for(case, model, optim)
    stale_gradients(model, case.batches[0], optim)
    batches = (batch for batch in case.batches)
    with torch.enable_grad():
        returned = call(model, batches, optimizer, case.pad_id, smoothing=case.smoothing,
                        scheduler=scheduler, clip=case.clip)  # fmt: skip
    rate = current_rate(scheduler, optimizer)
    weights = read(model, names)
    left = gradients_left(model, optimizer, read, names)  # takes one more step: read after all else
    return LoopOutcome(returned, bool(model.training), weights, rate, left)


def _stand_in_loop(fn, case: LoopCase, layout: list[str] | None = None) -> LoopOutcome:
    """``fn`` on a copy of the case's StandIn or, given a ``layout``, on the StandIn cut into the
    parameters it names (``Relaid``)."""
    model = (copy.deepcopy(case.stand_in) if layout is None else Relaid(case.stand_in, layout)).eval()

    with exact_matmul(), oracles.fastpath_disabled():
        return _run_loop(fn, case, model, torch.optim, stand_in_weights, None)


def _loop_outcomes(case: LoopCase) -> list[tuple[core.Mistake, LoopOutcome | None]]:
    return outcomes_of(LOOP_MISTAKES, _stand_in_loop, case)


def _own_layout_outcomes(case: LoopCase, layout: list[str]) -> list[tuple[core.Mistake, LoopOutcome | None]]:
    """The mistakes whose outcome depends on how the weights are cut into parameters, on the
    stand-in cut as the learner's model is; never on the learner's model, which under the judge
    lives in the kernel, where none of the checks' code runs."""
    mistakes = [m for m in LOOP_MISTAKES if m.name in OWN_LAYOUT_MISTAKES]
    return outcomes_of(mistakes, functools.partial(_stand_in_loop, layout=layout), case)


def _same_losses(a, b) -> bool:
    return len(a) == len(b) and all(
        math.isclose(number(x), number(y), rel_tol=LOOP_RTOL, abs_tol=1e-9) for x, y in zip(a, b, strict=True)
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
            f"{TRAIN_LOOP}: the loss of step {k + 1} is {number(actual[k]):.8g}, expected "
            f"{expected[k]:.8g} (the same steps taken with PyTorch's own modules, SGD lr = {case.lr}, "
            f"{clip}); the steps before it are right. Each step, for each batch in turn: {step}. If your "
            "train_loop takes its loss from your sequence_loss (or its steps from your train_step) and "
            "their checks above fail, the fault is there."
        )
    if stage == "weights":
        name, gap = largest_change(actual, expected)
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

    def layout() -> list[str]:
        """The names of the learner's parameters: data, which the judge reads from the kernel's model."""
        return [name for name, _ in model.named_parameters()]

    with telling_warnings_quoted():
        return _compare_loop(case, learner, model, optim, names, layout)


def _narrowed(found: list[tuple[core.Mistake, LoopOutcome]], outcome: LoopOutcome) -> list[core.Mistake]:
    """Of several known mistakes that match at one stage, those that match the learner's outcome at
    every stage, and then on whether gradients were left in .grad (zero_grad between backward and
    step leaves none, a step taken before backward leaves the last backward's)."""
    for keep in (
        lambda o: all(equal(get(outcome), get(o)) for _, get, equal in LOOP_STAGES),
        lambda o: o.gradients_left == outcome.gradients_left,
    ):
        found = [(m, o) for m, o in found if keep(o)] or found
    return [m for m, _ in found]


def _compare_loop(case: LoopCase, learner, model, optim, names: list[str], layout) -> LoopOutcome:
    """The learner's loop against the oracle's, stage by stage; the oracle's outcome. A difference
    is named after the known mistakes that match it on the stand-in, or else on the stand-in cut
    into the learner's parameters (``layout()`` names them)."""
    outcome = _run_loop(learner, case, model, optim, weights_of, names)
    _expect_losses_list(outcome.returned, len(case.batches))
    expected = _stand_in_loop(oracle_loop, case)
    for what, get, equal in LOOP_STAGES:
        actual, wanted = get(outcome), get(expected)
        if equal(actual, wanted):
            continue
        matching = [(m, o) for m, o in _loop_outcomes(case) if o is not None and equal(actual, get(o))]
        if not matching:
            own = _own_layout_outcomes(case, layout())
            matching = [(m, o) for m, o in own if o is not None and equal(actual, get(o))]
        found = _narrowed(matching, outcome)
        if found:
            raise core.CheckFailure(
                found[0].message(TRAIN_LOOP) if len(found) == 1 else
                f"{TRAIN_LOOP}: your result matches {len(found)} known mistakes that look alike here: "
                + " Or: ".join(f"{m.said()}. {m.hint}" for m in found)
            )  # fmt: skip
        raise core.CheckFailure(_loop_fallback(case, what, actual, wanted))
    _expect_second_call(_run_loop(learner, case, model, optim, weights_of, names).returned, len(case.batches))
    return expected


def _expect_second_call(returned, n: int) -> None:
    """A second call returns its own ``n`` losses, not the first call's too: the capstone calls the
    loop again every config.every steps and adds up what each call returns."""
    if isinstance(returned, list | tuple) and len(returned) != n:
        raise core.CheckFailure(
            f"{TRAIN_LOOP}: the first call returned its {n} losses, but a second call, on {n} more batches "
            f"(the capstone calls train_loop again every config.every steps), returned {len(returned)}: the "
            "list must hold this call's losses only. Make it inside the function, losses = [] at its start, "
            "not outside it or as a default argument (def train_loop(..., losses=[]) keeps one list for "
            "every call)."
        )
    _expect_losses_list(returned, n)


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


CATALOGUE = {TRAIN_LOOP: LOOP_MISTAKES}
