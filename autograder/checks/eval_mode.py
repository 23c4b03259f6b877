"""What a module does on its second call, and with dropout > 0 in eval mode: the same as on its
first call with dropout 0.

A module called twice on the same inputs returns the same output: a forward that changes the
module (weights scaled in place, a cache, a counter) is right once and wrong from then on, and the
checks' first call, the only one most of them make, never shows it.

Every other check builds the learner's module with dropout 0, where a dropout that ignores the
mode drops nothing. So a module whose dropout stays on in eval mode (``F.dropout(x, p)`` without
``training=self.training``, attention's ``dropout_p`` passed in every mode, a mask drawn by hand)
passes them all, and then makes every evaluation, decoding and experiment after training random.
Here the module is built once more with dropout = ``EVAL_DROPOUT``, called twice on the same
inputs, and both outputs are compared with dropout 0's answer. Two different outputs are the
catalogued mistake ``DROPOUT_IN_EVAL``, written once (for lesson 05's MultiHeadAttention) and
shared by every Python module with a dropout argument; the second-call check runs first, so two
different outputs there are dropout's, not a forward that changes its module.

In train mode, which entries a right dropout zeroes cannot be told without its random draws (it
drops hidden units or attention weights, inside the module), so no right answer is compared with
one. Two wrong ones show whatever the draws: an output equal to dropout 0's (nothing dropped), and
an output whose every entry is 0 or dropout 0's answer scaled by 1 / (1 - p) (the dropout moved to
the module's output). ``dropped_pattern`` tells the second.
"""

from collections.abc import Callable, Sequence
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from autograder.checks import core
from autograder.checks.answers import Expected

EVAL_DROPOUT = 0.3
DROPOUT_IN_EVAL = "dropout also in eval mode"
NO_DROPOUT_IN_TRAINING = "no dropout in training"
DROPOUT_ON_OUTPUT = "dropout on the output"


def built_dropout(module: Any) -> float:
    """The probability a module was built with, where the lessons' reference keeps it (an
    nn.Dropout or a number in ``dropout``, an nn.Dropout in ``dropout1``); 0.0 where it keeps none."""
    for name in ("dropout", "dropout1"):
        kept = getattr(module, name, None)
        if isinstance(kept, nn.Dropout):
            return float(kept.p)
        if isinstance(kept, int | float) and not isinstance(kept, bool):
            return float(kept)
    return 0.0


def dropped(module: Any, x: torch.Tensor) -> torch.Tensor:
    """``x`` as a dropout that ignores the mode leaves it: dropped with the probability ``module``
    was built with, in eval mode too (unchanged at dropout 0, as that mistake is)."""
    p = built_dropout(module)
    return x if p == 0 else F.dropout(x, p, training=True)


def dropped_pattern(out: torch.Tensor, target: torch.Tensor, p: float | None = None) -> bool:
    """Some entries of ``out`` are 0 and the others equal target / (1 - p) (for some p when p is
    None): ``target`` passed through a dropout."""
    if out.shape != target.shape:
        return False
    zeroed = out == 0
    if zeroed.all() or not zeroed.any():
        return False
    kept = ~zeroed
    scale = (out[kept] / target[kept]).mean() if p is None else 1.0 / (1.0 - p)
    return bool(torch.allclose(out[kept], target[kept] * scale))


def expect_dropout_in_training(
    exercise: str, mistakes: Sequence[core.Mistake], run: Callable[[], Any], expected: Expected, p: float
) -> None:
    """``run()``, the learner's module built with dropout = p and in train mode, on fixed inputs:
    its output must differ from ``expected()`` (dropout 0's answer) and must not be that answer
    dropped out. The two catalogued mistakes are ``mistakes``' ``NO_DROPOUT_IN_TRAINING`` and
    ``DROPOUT_ON_OUTPUT``."""
    out = run()
    right = expected()
    if not isinstance(out, torch.Tensor) or out.shape != right.shape:
        return  # the eval-mode checks have compared this module's outputs already
    out, right = out.detach(), right.detach().to(out.device)
    if core.same(out, right):
        name, shown = NO_DROPOUT_IN_TRAINING, "equals the output with dropout 0"
    elif dropped_pattern(out, right, p):
        name = DROPOUT_ON_OUTPUT
        shown = "is the output with dropout 0 with some entries zeroed and the others scaled by 1 / (1 - p)"
    else:
        return
    mistake = core.named(mistakes, name)
    raise core.CheckFailure(
        f"{exercise}: built with dropout = {p} and put in train mode (.train()), its output {shown}: "
        f"{mistake.said()}. {mistake.hint}"
    )


def expect_same_on_second_call(exercise: str, run: Callable[[], Any], expected: Expected) -> None:
    """``run()``, the learner's module (dropout 0, eval mode) on the inputs of a call just found
    right, twice more: both outputs must still equal ``expected()`` (computed after the calls)."""
    outputs = [run(), run()]
    right = expected()
    if not all(core.same(out, right) for out in outputs):
        raise core.CheckFailure(
            f"{exercise}: called again on the same inputs (dropout 0, eval mode), it returned another "
            "output than on the call before, which was right: its forward changes the module, so the "
            "calls after the first are wrong. Compute from the inputs and the parameters alone, on every "
            "call: no weight changed in place (`weight /= ...`, `.data`), nothing kept for the next call."
        )


def expect_dropout_off_in_eval(
    exercise: str, mistakes: Sequence[core.Mistake], run: Callable[[], Any], expected: Expected, letters: str
) -> None:
    """``run()``, the learner's module built with dropout = EVAL_DROPOUT and in eval mode called on
    fixed inputs, twice: both outputs must equal ``expected()`` (dropout 0's answer, computed after
    the learner's calls). Two different outputs name the catalogued mistake; one wrong output
    given twice is compared as any output is."""
    first, second = run(), run()
    right = expected()
    if core.same(first, right) and core.same(second, right):
        return
    if not core.same(first, second):
        mistake = core.named(mistakes, DROPOUT_IN_EVAL)
        raise core.CheckFailure(
            f"{exercise}: built with dropout = {EVAL_DROPOUT} and put in eval mode (.eval()), it returned "
            f"two different outputs for the same input, where dropout must drop nothing and both must "
            f"equal the output with dropout 0: {mistake.said()}. {mistake.hint}"
        )
    where = (
        " With dropout = 0 your output is right, so the dropout argument changes what your module "
        "computes in eval mode, where it must change nothing: is it passed on in another argument's place?"
    )
    what = f"the output with dropout = {EVAL_DROPOUT} in eval mode"
    core.expect_close(exercise, what, first, right, letters, where=where)
