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
