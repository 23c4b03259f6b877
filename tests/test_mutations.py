"""Every check can fail: each catalogued mistake and the untouched stub are caught and named,
and every alternative correct implementation is accepted (architecture, principle 5).

For each exercise, the visible part of each of its test cells runs, in notebook order (the
cells themselves, read by autograder/grading.py: what nbgrader grades). The first that fails
must carry the mistake's own hint. The hidden parts must reject every mistake and the stub
too, and accept the reference and the alternatives.
"""

import pytest

from autograder.checks import CheckFailure
from autograder.lessons import EXERCISES, written_lessons
from tests.alternatives import ALTERNATIVES
from tests.helpers import (
    CATALOGUE,
    CHECKS,
    CPP_EXERCISES,
    HIDDEN,
    buggy,
    reference_of,
    resolved_alternative,
    stub,
)


def _first_failure(exercise: str, implementation) -> str | None:
    for check in CHECKS[exercise]:
        try:
            check(implementation)
        except CheckFailure as failure:
            return str(failure)
    return None


MISTAKE_CASES = [(e, m) for e, mistakes in CATALOGUE.items() for m in mistakes if e not in CPP_EXERCISES]


def test_every_exercise_has_checks_mistakes_and_hidden_tests():
    written = [e for lesson in written_lessons() for e in EXERCISES[lesson]]
    assert written, "no lesson is written"
    for exercise in written:
        assert CHECKS.get(exercise), f"{exercise} has no test cell with visible checks"
        assert CATALOGUE.get(exercise), f"{exercise} has no catalogued mistakes"
        assert HIDDEN.get(exercise), f"{exercise} has no hidden tests"


@pytest.mark.parametrize("exercise", sorted(CHECKS))
def test_reference_passes_every_check(exercise):
    for check in CHECKS[exercise]:
        check(reference_of(exercise))
    for hidden in HIDDEN[exercise]:
        hidden(reference_of(exercise))


@pytest.mark.parametrize(
    ("exercise", "mistake"), MISTAKE_CASES, ids=[f"{e}-{m.name}" for e, m in MISTAKE_CASES]
)
def test_mistake_is_caught_and_named(exercise, mistake):
    message = _first_failure(exercise, buggy(exercise, mistake))
    assert message is not None, f"no visible check of {exercise} catches the mistake {mistake.name!r}"
    assert mistake.hint in message, f"{mistake.name!r} got the wrong message: {message}"
    for hidden in HIDDEN[exercise]:
        try:
            hidden(buggy(exercise, mistake))
        except CheckFailure:
            break
    else:
        pytest.fail(f"the hidden tests of {exercise} accept the mistake {mistake.name!r}")


@pytest.mark.parametrize("exercise", sorted(CHECKS))
def test_stub_fails_with_not_implemented(exercise):
    message = _first_failure(exercise, stub(exercise))
    assert message is not None and "is not implemented yet" in message, message
    for hidden in HIDDEN[exercise]:
        with pytest.raises(CheckFailure, match="is not implemented yet"):
            hidden(stub(exercise))


ALTERNATIVE_CASES = [(e, alt) for e, alts in ALTERNATIVES.items() for alt in alts]


@pytest.mark.parametrize(
    ("exercise", "alternative"), ALTERNATIVE_CASES, ids=[f"{e}-{a.__name__}" for e, a in ALTERNATIVE_CASES]
)
def test_alternative_correct_implementation_passes(exercise, alternative):
    alternative = resolved_alternative(exercise, alternative)
    for check in CHECKS[exercise]:
        check(alternative)
    for hidden in HIDDEN[exercise]:
        hidden(alternative)


def test_every_checked_exercise_has_two_alternatives():
    for exercise in CHECKS:
        assert len(ALTERNATIVES.get(exercise, [])) >= 2, f"{exercise} needs two alternative implementations"
