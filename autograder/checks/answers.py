"""How a check is given the right answer: computed only once the learner's code has returned.

A check that held its expected value while it called the learner's code would leave it where
that code can read it (a caller's frame through ``sys._getframe``, a closure, a module's
globals), to keep and give back when called again with the same inputs, as the judge calls it
(tests/test_hostile_replay.py). So a compare function takes an ``Expected``: a function of no
arguments that computes the answer, called after the learner's output is in hand. What it
closes over is the oracle and the inputs, never an answer.
"""

from collections.abc import Callable
from typing import Any

import torch

from autograder.checks.device import exact_matmul
from autograder.checks.oracles import plain_torch

Expected = Callable[[], Any]


def answer(compute: Callable[..., Any], *args: Any, **kwargs: Any) -> Expected:
    """The right answer as ``compute(*args, **kwargs)`` gives it (no gradients, exact matmuls, as the
    learner's code is called), computed when called."""

    def expected() -> Any:
        with torch.no_grad(), exact_matmul():
            return compute(*args, **kwargs)

    return expected


def torch_answer(oracle: Callable[..., Any], *args: Any, **kwargs: Any) -> Expected:
    """The right answer as PyTorch's own module ``oracle`` gives it, run as oracles are run
    (``plain_torch``: no gradients, exact matmuls, no fused fast path), computed when called."""

    def expected() -> Any:
        with plain_torch():
            return oracle(*args, **kwargs)

    return expected
