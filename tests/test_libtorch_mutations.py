"""Lesson 12's catalogued mistakes, proven in C++: each is written as an edit of the reference's C++
(tests/alternatives/libtorch.py), compiled, and run through the lesson's own test cells, visible
parts in notebook order, then hidden parts. The first visible failure must carry the mistake's own
hint, and some hidden part must reject it too. nbgrader's stub, read as C++, must compile and be
reported as not implemented. Every variant compiles in one build.
"""

import functools

import pytest

from autograder import grading, libtorch
from autograder.checks import CheckFailure
from autograder.checks import libtorch as checks
from tests.alternatives import libtorch as variants

LESSON = "12_libtorch"


def _cells(part: str) -> dict[str, list]:
    cells: dict[str, list] = {}
    for test in grading.table(LESSON):
        code = getattr(test, part)
        if code:
            cells.setdefault(test.exercise, []).append(functools.partial(grading.run, test, code))
    return cells


VISIBLE, HIDDEN = _cells("visible"), _cells("hidden")
MUTANT_CASES = [(e, name) for e, mutants in variants.MUTANTS.items() for name in mutants]


@pytest.fixture(scope="module")
def compiled():
    if libtorch.missing_tools():
        pytest.skip(libtorch.explain_missing(libtorch.missing_tools()))
    return variants.compiled()


def test_every_catalogued_mistake_has_a_cpp_mutant_and_no_more():
    for exercise, mistakes in checks.CATALOGUE.items():
        assert sorted(m.name for m in mistakes) == sorted(variants.MUTANTS[exercise]), exercise


@pytest.mark.parametrize(("exercise", "mistake"), MUTANT_CASES, ids=[f"{e}-{m}" for e, m in MUTANT_CASES])
def test_cpp_mistake_is_caught_and_named(compiled, exercise, mistake):
    hint = next(m.hint for m in checks.CATALOGUE[exercise] if m.name == mistake)
    mutant = compiled[exercise, mistake]
    for cell in VISIBLE[exercise]:
        try:
            cell(mutant)
        except CheckFailure as failure:
            assert hint in str(failure), f"{mistake!r} got the wrong message: {failure}"
            break
    else:
        pytest.fail(f"no visible check of {exercise} catches the C++ mistake {mistake!r}")
    for cell in HIDDEN[exercise]:
        try:
            cell(mutant)
        except CheckFailure:
            break
    else:
        pytest.fail(f"the hidden tests of {exercise} accept the C++ mistake {mistake!r}")


EVAL_DROPOUT_CASES = [e for e, mutants in variants.MUTANTS.items() if "dropout also in eval mode" in mutants]


@pytest.mark.parametrize("exercise", EVAL_DROPOUT_CASES)
def test_dropout_left_on_in_eval_passes_every_cell_built_with_dropout_0(compiled, monkeypatch, exercise):
    """What the eval-mode check adds: without it (patched off), torch::dropout(x, p, true) passes
    every visible and hidden part, as it did when the checks built the modules with dropout 0 only."""
    monkeypatch.setattr(checks, "expect_dropout_off_in_eval", lambda *args, **kwargs: None)
    mutant = compiled[exercise, "dropout also in eval mode"]
    for cell in VISIBLE[exercise] + HIDDEN[exercise]:
        cell(mutant)
    monkeypatch.undo()
    with pytest.raises(CheckFailure, match="returned two different outputs for the same input") as raised:
        for cell in VISIBLE[exercise]:
            cell(mutant)
    told = str(raised.value)  # the shared mistake, told in C++: what to change in the learner's language
    assert "torch::dropout(x, p, is_training())" in told and "self.training" not in told, told


@pytest.mark.parametrize("exercise", sorted(variants.REFERENCES))
def test_nbgraders_stub_compiles_and_is_not_implemented(compiled, exercise):
    for cell in VISIBLE[exercise] + HIDDEN[exercise]:
        with pytest.raises(CheckFailure, match="is not implemented yet"):
            cell(compiled[exercise, "stub"])


def test_mutants_edit_the_reference():
    with pytest.raises(ValueError, match="no longer holds"):
        variants.mutated("return x;", [("return y;", "return z;")])
    assert "TORCH_CHECK_NOT_IMPLEMENTED" not in variants.stubbed(variants.REFERENCES["CppEmbedding"].source)
    assert (
        variants.stubbed(variants.REFERENCES["CppEmbedding"].source).count("raise NotImplementedError()") == 2
    )
