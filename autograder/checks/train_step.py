"""Checks for lesson 10's train_step(model, batch, optimizer, pad_id, smoothing=0.0, scheduler=None);
the lesson's test cells call its training loop's checks here too (autograder/checks/train_loop.py).

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

import math
import numbers
import warnings

import torch

from autograder.checks import core, shape_errors
from autograder.checks.output_layer import load_transformer, transformer_args, transformer_module
from autograder.checks.train_loop import check_train_loop, check_train_loop_clip  # noqa: F401 - the lesson's
from autograder.checks.training_oracle import (
    D_FF,
    D_MODEL,
    MAX_LEN,
    MISTAKES,
    N_HEADS,
    N_LAYERS,
    PAD,
    SEED,
    SIGNATURE,
    T_SRC,
    T_TGT,
    TRAIN_STEP,
    V_SRC,
    V_TGT,
    B,
    Case,
    Outcome,
    arguments_for,
    expected_outcome,
    largest_change,
    make_case,
    mistake_outcomes,
    same_loss,
    same_weights,
    telling_warnings_quoted,
    two_calls,
    weights_of,
)


def _stages(case: Case):
    """(what, how to compare two outcomes there) in the order the check looks."""
    return [
        ("returned_1", lambda o: o.returned[0], same_loss),
        ("training", lambda o: o.training[0], lambda a, b: a == b),
        ("weights_1", lambda o: o.weights[0], same_weights),
        ("rate_1", lambda o: o.rates[0], lambda a, b: math.isclose(a, b, rel_tol=1e-9)),
        ("returned_2", lambda o: o.returned[1], same_loss),
        ("weights_2", lambda o: o.weights[1], same_weights),
        ("rate_2", lambda o: o.rates[1], lambda a, b: math.isclose(a, b, rel_tol=1e-9)),
    ]


def _agrees(stage, actual: Outcome, outcome: Outcome) -> bool:
    _, get, equal = stage
    try:
        return bool(equal(get(actual), get(outcome)))
    except (KeyError, RuntimeError, TypeError, ValueError):
        return False


def _matching(case: Case, stage, actual: Outcome) -> list[core.Mistake]:
    """The known mistakes whose outcome at ``stage`` is the learner's (and right before it); of
    several, those that agree with the learner's at every stage, and then on whether the
    gradients were left in .grad (zero_grad between backward and step leaves none)."""
    found = [(m, o) for m, o in mistake_outcomes(case) if o is not None and _agrees(stage, actual, o)]
    for keep in (
        lambda o: all(_agrees(other, actual, o) for other in _stages(case)),
        lambda o: o.gradients_left == actual.gradients_left,
    ):
        narrowed = [(m, o) for m, o in found if keep(o)]
        found = narrowed or found
    return [m for m, _ in found]


def _crash_named(case: Case, model_class, optim, error: Exception) -> core.Mistake | None:
    """The known mistake that crashes the learner's own model as the learner's train_step did
    (the masks in each other's places: a broadcast error deep in the model), or None."""
    for mistake in MISTAKES:
        model = transformer_module(model_class, case.args)
        load_transformer(model, case.stand_in.course_state())
        optimizer, scheduler = arguments_for(case, model, optim)
        try:
            with torch.enable_grad(), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                mistake.compute(model, case.batch, optimizer, case.pad_id, case.smoothing, scheduler)
        except Exception as own:  # noqa: BLE001 - the mistake's crash, compared with the learner's
            if shape_errors.error_key(own) == shape_errors.error_key(error):
                return mistake
    return None


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
    listed = " Or: ".join(f"{m.said()}. {m.hint}" for m in mistakes)
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
        name, gap = largest_change(actual, expected)
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
        try:
            return core.call(TRAIN_STEP, fn, *args)
        except core.CheckFailure as failure:
            error = core.crash_of(failure)
            mistake = _crash_named(case, model_class, optim, error) if error is not None else None
            if mistake is None:
                raise
            raise core.CheckFailure(
                f"{TRAIN_STEP}: your code fails like a known mistake, {mistake.said()}. {mistake.hint}"
            ) from error

    with telling_warnings_quoted():
        return _compare(case, learner, model, optim, names)


def _compare(case: Case, learner, model, optim, names: list[str]) -> Outcome:
    """The learner's two calls against the oracle's, stage by stage; the oracle's outcome."""
    outcome = two_calls(learner, case, model, optim, weights_of, names)
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
        mistakes = _matching(case, stage, outcome)
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


CATALOGUE = {TRAIN_STEP: MISTAKES}
