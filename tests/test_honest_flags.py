"""No honest submission is ever flagged: the notebook's verdict and the judge's agree (principle 10).

A submission here is a lesson's notebook as the reference solution fills it in, with one exercise
replaced by one of its catalogued mistakes, by its stub, or left right. The other exercises keep
the reference's solution cells, run in the notebook's own namespace, so an exercise that calls
another (``cached_greedy_decode`` calls ``decoder_layer_step``) calls the replaced one, as in a
learner's kernel. Each test cell of the replaced exercise and of the exercises that call it runs
as the notebook runs it (its kernel drawing one seed) and as the judge runs it
(``judge.run_test_cell`` with another, reaching the notebook's names through
``autograder.engine.remote`` over a socket pair, the kernel's end served in a thread), for each seed.

A cell's visible part draws no hidden seed, so it runs once; its hidden part runs once per seed,
and only where the visible part passed (a cell stops at its first failure, in the notebook and
before the judge). The notebook and the judge never share a seed (the judge keeps its own from the
kernel, so that no answer recorded in the notebook can be replayed to it): the notebook draws from
one of SEEDS and the judge from the one half the list away (``_judge_seed``), so over the twenty
every seed serves once as each. A cell that passes in the notebook must pass before the judge, and
the other way round, except for code that changes its inputs in place, which the judge's copies
hide: there the judge may only be more lenient (as tests/test_judge.py documents).

Every submission is graded with all twenty SEEDS when COURSE_HONEST_SEEDS=20 (about two hours of
CPU on a 2-core machine); by default each gets one of them, the next for the next submission, so
that twenty submissions in a row share out all twenty (one seed each: about eleven minutes of
CPU). A verdict that depends on the seed shows as a disagreement here: a mistake whose verdict
depended on a drawn choice (a Pre-LN-only mistake of decoder_layer_step under
cached_greedy_decode's hidden test, whose model was Pre-LN for some seeds only) disagreed at one
seed in two until that hidden test tested both variants on every seed.
"""

import ast
import contextlib
import functools
import inspect
import io
import os
import socket
import threading

import pytest

from autograder import grading
from autograder.checks import CheckFailure
from autograder.checks.device import exact_matmul
from autograder.engine import judge
from autograder.engine.remote import Channel, Endpoint, models_read_only
from autograder.hidden.core import SEED_VARIABLE
from autograder.lessons import EXERCISES, written_lessons
from tests.helpers import CATALOGUE, CPP_EXERCISES, buggy, stub

SEEDS = range(20260101, 20260121)
PER_SUBMISSION = int(os.environ.get("COURSE_HONEST_SEEDS", "1"))


def _seeds(index: int) -> list[int]:
    """The seeds of the ``index``-th submission: PER_SUBMISSION of SEEDS, where the last one left off."""
    return [SEEDS[(index * PER_SUBMISSION + step) % len(SEEDS)] for step in range(PER_SUBMISSION)]


def _judge_seed(seed: int) -> int:
    """The judge's seed when the notebook draws ``seed``: another of SEEDS, half the list away."""
    return SEEDS[(SEEDS.index(seed) + len(SEEDS) // 2) % len(SEEDS)]


def _solution_cells(lesson: str) -> dict[str, str]:
    """exercise -> the source of its solution cell, in the lesson's source notebook."""
    return {
        cell.metadata.nbgrader["grade_id"]: cell.source
        for cell in grading.source_notebook(lesson).cells
        if cell.metadata.get("nbgrader", {}).get("solution")
    }


def _notebook(lesson: str, exercise: str | None, replacement=None) -> dict:
    """The names a learner's kernel holds after the solution cells ran: the lesson's imports, then
    the reference's solution cells in order in that one namespace, with ``exercise`` bound to
    ``replacement`` instead when one is given (so the other cells' code calls it)."""
    namespace = dict(grading.lesson_imports(lesson))
    for name, source in _solution_cells(lesson).items():
        exec(compile(source, f"<{lesson} solution>", "exec"), namespace)  # noqa: S102 - our own source
        if name == exercise and replacement is not None:
            namespace[name] = replacement
    return namespace


@functools.cache
def _callers(lesson: str, exercise: str) -> frozenset[str]:
    """The lesson's exercises whose solution cells call ``exercise``, directly or through another."""
    names = {
        caller: {node.id for node in ast.walk(ast.parse(source)) if isinstance(node, ast.Name)}
        for caller, source in _solution_cells(lesson).items()
    }
    found: set[str] = set()
    wanted = {exercise}
    while wanted:
        found |= wanted
        wanted = {caller for caller, used in names.items() if used & found} - found
    return frozenset(found - {exercise})


def _replacement(exercise: str | None, kind: str, mistake):
    """What the learner's cell defines under the exercise's name: the reference's own (None), the
    stub, or the mistake."""
    if kind == "reference":
        return None
    if exercise in CPP_EXERCISES:  # lesson 12: nbgrader's stub and the mistakes, compiled from C++
        from tests.alternatives import libtorch as cpp_variants

        return cpp_variants.compiled()[exercise, "stub" if kind == "stub" else mistake.name]
    return stub(exercise) if kind == "stub" else buggy(exercise, mistake)


def _lesson_of(exercise: str) -> str:
    return next(lesson for lesson, names in EXERCISES.items() if exercise in names)


def _kernel_verdict(code: str, grade_id: str, namespace: dict) -> str | None:
    """Part of a test cell run as the notebook runs it: None when it passes, else why not."""
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            exec(compile(code, f"<{grade_id}>", "exec"), dict(namespace))  # noqa: S102 - our own source
    except CheckFailure as failure:
        return str(failure)
    except Exception as error:  # noqa: BLE001 - a crash fails the cell, as in the notebook
        return f"{type(error).__name__}: {error}"
    return None


def _judge_verdict(code: str, grade_id: str, lesson: str, namespace: dict, seed: int) -> str | None:
    """Part of a test cell run as the judge runs it, against ``namespace`` served as the kernel serves
    the notebook's names, on a connection of its own (the judge opens one per test cell)."""
    ours, theirs = socket.socketpair()
    kernel = Endpoint(Channel(theirs), namespace, calls_within=exact_matmul)
    thread = threading.Thread(target=kernel.serve, daemon=True)
    thread.start()
    endpoint = Endpoint(Channel(ours), guard=models_read_only, calls_within=exact_matmul)
    try:
        return judge.run_test_cell(code, grade_id, grading.grading_imports(lesson), endpoint, seed)
    finally:
        endpoint.say_goodbye()
        thread.join(timeout=10)
        ours.close()
        theirs.close()


def _disagreements(lesson: str, namespace: dict, cells: list, lenient: bool, seeds: list[int], monkeypatch):
    """Each (cell, seed) whose verdicts differ: the notebook's, its kernel drawing ``seed``, and the
    judge's, drawing a seed of its own (``_judge_seed``; its process has no COURSE_HIDDEN_SEED)."""
    found = []
    for test in cells:
        here = _kernel_verdict(test.visible, test.grade_id, namespace)
        there = _judge_verdict(test.visible, test.grade_id, lesson, namespace, seeds[0])
        hidden_seeds = seeds if here is None and there is None and test.hidden else []
        if (here is None) != (there is None) and not (lenient and here is not None):
            found.append(f"{test.grade_id} (visible): notebook {here!r}, judge {there!r}")
        for seed in hidden_seeds:
            monkeypatch.setenv(SEED_VARIABLE, str(seed))  # the kernel's own seed, as a grader may set it
            here = _kernel_verdict(test.hidden, test.grade_id, namespace)
            monkeypatch.delenv(SEED_VARIABLE)
            judged = _judge_seed(seed)
            there = _judge_verdict(test.hidden, test.grade_id, lesson, namespace, judged)
            if (here is None) != (there is None) and not (lenient and here is not None):
                found.append(f"{test.grade_id}, seeds {seed}, {judged}: notebook {here!r}, judge {there!r}")
    return found


CASES = [(lesson, None, "reference", None) for lesson in written_lessons()]
CASES += [(_lesson_of(e), e, "stub", None) for e in sorted(CATALOGUE)]
CASES += [(_lesson_of(e), e, "mistake", m) for e, mistakes in CATALOGUE.items() for m in mistakes]
CASES = [case for case in CASES if case[0] in written_lessons()]


def half(parity: int) -> dict:
    """pytest's parameters for every other case, from the first (0) or the second (1): the cases
    are shared out between this file and tests/test_honest_flags_half.py, which make test runs
    on two workers each take half (a test file stays on one worker)."""
    chosen = [(index, *case) for index, case in enumerate(CASES) if index % 2 == parity]
    return {
        "argnames": ("index", "lesson", "exercise", "kind", "mistake"),
        "argvalues": chosen,
        "ids": [f"{e or lesson}-{k}" + (f"-{m.name}" if m else "") for _, lesson, e, k, m in chosen],
    }


def agrees(index: int, lesson: str, exercise: str | None, kind: str, mistake, monkeypatch) -> None:
    """The reference's notebook, or one exercise in it replaced by its stub or a mistake: every test
    cell of the lesson, or those of the exercise and of the exercises that call it, gets the same
    verdict in the notebook and before the judge."""
    namespace = _notebook(lesson, exercise, _replacement(exercise, kind, mistake))
    graded = set(EXERCISES[lesson]) if exercise is None else {exercise} | _callers(lesson, exercise)
    cells = [test for test in grading.table(lesson) if test.exercise in graded]
    lenient = kind == "mistake" and "in place" in mistake.name
    assert _disagreements(lesson, namespace, cells, lenient, _seeds(index), monkeypatch) == []


@pytest.mark.parametrize(**half(0))
def test_no_honest_submission_is_flagged(index, lesson, exercise, kind, mistake, monkeypatch):
    agrees(index, lesson, exercise, kind, mistake, monkeypatch)


def test_a_caller_is_graded_with_the_exercise_it_calls():
    """The lesson-11 case is among the combinations: a wrong decoder_layer_step is graded with the
    reference cached_greedy_decode's cells too, and that reference calls the wrong step."""
    assert _callers("11_efficiency", "decoder_layer_step") == {"cached_greedy_decode"}
    assert _callers("04_masking", "causal_mask") == {"decoder_mask"}
    notebook = _notebook("11_efficiency", "decoder_layer_step", stub("decoder_layer_step"))
    assert inspect.unwrap(notebook["cached_greedy_decode"]).__globals__ is notebook
