"""Fresh randomness for hidden tests, and the seed that replays it.

Every hidden test draws new sizes and values on each run, so that an answer hard-coded to
the visible checks' inputs fails. The seed it drew is printed in its failure message;
setting ``COURSE_HIDDEN_SEED`` to that number makes every hidden test draw exactly the
same sizes and values again, so an instructor can replay a learner's failure.

While grading, the judge (autograder/engine/judge.py) runs the hidden tests again with a seed of
its own (``seeded``), which the kernel never sees: the two runs draw different sizes and values.
So a hidden test must give an honest answer the same verdict for every seed: where a verdict
could depend on a choice it draws (Pre-LN or Post-LN), it tests every option instead.
"""

import contextlib
import contextvars
import functools
import os
from collections.abc import Callable, Iterator
from typing import Any

import torch

from autograder.checks.core import CheckFailure
from autograder.checks.device import DEVICE, DTYPE

SEED_VARIABLE = "COURSE_HIDDEN_SEED"
_GIVEN: contextvars.ContextVar[int | None] = contextvars.ContextVar("hidden_seed", default=None)


def new_seed() -> int:
    """The seed in COURSE_HIDDEN_SEED when it is set, else a new one from the operating system."""
    given = os.environ.get(SEED_VARIABLE, "").strip()
    if not given:
        return int.from_bytes(os.urandom(4), "little")
    if not given.isdigit():
        raise ValueError(f"{SEED_VARIABLE} must be a whole number (a hidden test's seed), got {given!r}")
    return int(given)


@contextlib.contextmanager
def seeded(seed: int) -> Iterator[None]:
    """Inside the block, in this thread, every ``Fresh`` draws from ``seed``, whatever
    COURSE_HIDDEN_SEED says (the judge's runs, in the grader's process)."""
    token = _GIVEN.set(seed)
    try:
        yield
    finally:
        _GIVEN.reset(token)


class Fresh:
    """A random source for one hidden test: a new seed on every run, unless one is given
    (by ``seeded``, else by COURSE_HIDDEN_SEED)."""

    def __init__(self) -> None:
        given = _GIVEN.get()
        self.seed = new_seed() if given is None else given
        self.generator = torch.Generator().manual_seed(self.seed)

    def size(self, low: int, high: int) -> int:
        """An integer in [low, high]."""
        return int(torch.randint(low, high + 1, (1,), generator=self.generator))

    def tensor(self, *shape: int) -> torch.Tensor:
        return torch.randn(*shape, generator=self.generator, dtype=DTYPE).to(DEVICE)

    def tokens(self, *shape: int, vocab_size: int, low: int = 0) -> torch.Tensor:
        return torch.randint(low, vocab_size, shape, generator=self.generator).to(DEVICE)

    def bools(self, *shape: int, p: float = 0.6) -> torch.Tensor:
        return (torch.rand(*shape, generator=self.generator) < p).to(DEVICE)


def replayable(test: Callable[..., None]) -> Callable[..., None]:
    """``test(fresh, *args)`` becomes ``test(*args)`` with a new ``Fresh``; a failure says its seed."""

    @functools.wraps(test)
    def run(*args: Any, **kwargs: Any) -> None:
        fresh = Fresh()
        try:
            test(fresh, *args, **kwargs)
        except CheckFailure as failure:
            failure.args = (
                f"{failure} (Hidden test {test.__name__}, seed {fresh.seed}: "
                f"{SEED_VARIABLE}={fresh.seed} replays it.)",
            )
            raise

    return run
