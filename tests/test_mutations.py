"""Every check can fail: each catalogued mistake and the untouched stub are caught and named,
and every alternative correct implementation is accepted (architecture, principle 5).

For each exercise, the visible part of each of its test cells runs, in notebook order (the
cells themselves, read by autograder/grading.py: what nbgrader grades). The first that fails
must carry the mistake's own hint. The hidden parts must reject every mistake and the stub
too, and accept the reference and the alternatives.
"""

import functools
import importlib
import pkgutil

import pytest
import torch

import autograder.checks
import solutions
from autograder import grading
from autograder.checks import CheckFailure, Mistake
from autograder.lessons import EXERCISES, written_lessons
from autograder.libtorch import CppSource
from solutions import libtorch as cpp_reference
from tests.alternatives import ALTERNATIVES

# Lesson 12's exercises are C++: their reference is compiled here, and their catalogued mistakes are
# proven by compiling each as C++ (tests/test_libtorch_mutations.py), not by a Python forward.
CPP_EXERCISES = set(EXERCISES["12_libtorch"])


def _collect(package, name: str) -> dict:
    merged = {}
    for info in pkgutil.iter_modules(package.__path__):
        module = importlib.import_module(f"{package.__name__}.{info.name}")
        merged.update(getattr(module, name, {}))
    return merged


def _parts(part: str) -> dict[str, list]:
    """exercise -> one callable per test cell that has this part ("visible" or "hidden"), in
    notebook order: the lessons' own test cells (autograder/grading.py), as nbgrader runs them."""
    parts: dict[str, list] = {}
    for lesson in written_lessons():
        for test in grading.table(lesson):
            code = getattr(test, part)
            if code:
                parts.setdefault(test.exercise, []).append(functools.partial(grading.run, test, code))
    return parts


CHECKS = _parts("visible")
HIDDEN = _parts("hidden")
CATALOGUE = _collect(autograder.checks, "CATALOGUE")


def _reference(exercise: str):
    """The reference's definition of ``exercise``; for a C++ exercise, its compiled class."""
    if exercise in CPP_EXERCISES:
        source = getattr(cpp_reference, exercise)
        assert isinstance(source, CppSource)
        return source.compile()
    return getattr(solutions, exercise)


def _buggy(exercise: str, mistake: Mistake):
    """The exercise written with the mistake: the function itself, or the reference class
    whose forward computes the mistake with the module's own parameters; for a C++ exercise,
    the mistake compiled from C++ (the checks refuse a Python class there)."""
    if exercise in CPP_EXERCISES:
        from tests.alternatives import libtorch as cpp_variants

        return cpp_variants.compiled()[exercise, mistake.name]
    reference = _reference(exercise)
    if not isinstance(reference, type):
        return mistake.compute
    return type(
        f"Buggy{exercise}", (reference,), {"forward": lambda self, *a, **kw: mistake.compute(self, *a, **kw)}
    )


def _stub(exercise: str):
    if exercise in CPP_EXERCISES:  # nbgrader's stub, compiled from C++
        from tests.alternatives import libtorch as cpp_variants

        return cpp_variants.compiled()[exercise, "stub"]
    reference = _reference(exercise)

    def not_implemented(*args, **kwargs):
        raise NotImplementedError()

    if not isinstance(reference, type):
        return not_implemented
    return type(f"Stub{exercise}", (torch.nn.Module,), {"__init__": not_implemented})


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
        check(_reference(exercise))
    for hidden in HIDDEN[exercise]:
        hidden(_reference(exercise))


@pytest.mark.parametrize(
    ("exercise", "mistake"), MISTAKE_CASES, ids=[f"{e}-{m.name}" for e, m in MISTAKE_CASES]
)
def test_mistake_is_caught_and_named(exercise, mistake):
    message = _first_failure(exercise, _buggy(exercise, mistake))
    assert message is not None, f"no visible check of {exercise} catches the mistake {mistake.name!r}"
    assert mistake.hint in message, f"{mistake.name!r} got the wrong message: {message}"
    for hidden in HIDDEN[exercise]:
        try:
            hidden(_buggy(exercise, mistake))
        except CheckFailure:
            break
    else:
        pytest.fail(f"the hidden tests of {exercise} accept the mistake {mistake.name!r}")


@pytest.mark.parametrize("exercise", sorted(CHECKS))
def test_stub_fails_with_not_implemented(exercise):
    message = _first_failure(exercise, _stub(exercise))
    assert message is not None and "is not implemented yet" in message, message
    for hidden in HIDDEN[exercise]:
        with pytest.raises(CheckFailure, match="is not implemented yet"):
            hidden(_stub(exercise))


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


def resolved_alternative(exercise: str, alternative):
    """The alternative itself; for a C++ exercise, the class its factory builds (compiled on first
    use, never at collection), since lesson 12's checks take only a class compile_module made."""
    if exercise in CPP_EXERCISES:
        from tests.alternatives import libtorch as cpp_variants

        return cpp_variants.compiled()[exercise, alternative.__name__]
    return alternative


def test_every_checked_exercise_has_two_alternatives():
    for exercise in CHECKS:
        assert len(ALTERNATIVES.get(exercise, [])) >= 2, f"{exercise} needs two alternative implementations"
