"""Mistakes in how a module is built, not in what forward computes: each message fires.

The mutation tests replace ``forward``; these build the reference class and then change one
thing about the module it made (an attribute renamed, a bias left out, a buffer registered as
a parameter, one layer repeated), as a learner's ``__init__`` would. The visible test cells of
the exercise run in notebook order, and the first failure must be the message written for that
mistake. The same cells must pass on the unchanged reference (test_mutations.py proves it).
"""

import weakref

import pytest

import solutions
from autograder.checks import CheckFailure
from tests.helpers import CHECKS, STRUCTURAL_MISTAKES, built_wrongly


@pytest.mark.parametrize(
    ("exercise", "name", "change", "message"), STRUCTURAL_MISTAKES, ids=[c[1] for c in STRUCTURAL_MISTAKES]
)
def test_a_structural_mistake_gets_its_own_message(exercise, name, change, message):
    cls = built_wrongly(exercise, change)
    for check in CHECKS[exercise]:
        try:
            check(cls)
        except CheckFailure as failure:
            assert message in str(failure), f"{name}: {failure}"
            return
    pytest.fail(f"no visible check of {exercise} caught: {name}")


def _loop_keeping_its_list():
    """A train_loop whose list of losses outlives the call (made outside it, as a default argument
    would be): right on a first call, every earlier loss again on the next."""
    kept: list[float] = []

    def train_loop(model, batches, optimizer, pad_id, smoothing=0.0, scheduler=None, clip=None):
        for batch in batches:
            kept.append(solutions.train_step(model, batch, optimizer, pad_id, smoothing, scheduler))
        return kept

    return train_loop


def _decoding_remembered():
    """A cached_greedy_decode that keeps each model's first decoding on the model's side and returns
    it again: right on a first call, the old tokens for another source."""
    remembered = weakref.WeakKeyDictionary()

    def cached_greedy_decode(model, src, src_mask, max_len, start_symbol, end_symbol=None):
        if model not in remembered:
            remembered[model] = solutions.cached_greedy_decode(
                model, src, src_mask, max_len, start_symbol, end_symbol
            )
        return remembered[model]

    return cached_greedy_decode


SECOND_CALLS = [
    ("train_loop", _loop_keeping_its_list, "not outside it or as a default argument"),
    ("cached_greedy_decode", _decoding_remembered, "a second call on the same model"),
]


@pytest.mark.parametrize(("exercise", "make", "message"), SECOND_CALLS, ids=[c[0] for c in SECOND_CALLS])
def test_code_right_on_its_first_call_only_is_caught_on_the_second(exercise, make, message):
    implementation = make()
    for check in CHECKS[exercise]:
        try:
            check(implementation)
        except CheckFailure as failure:
            assert message in str(failure), f"{exercise}: {failure}"
            return
    pytest.fail(f"no visible check of {exercise} caught code that is right on its first call only")
