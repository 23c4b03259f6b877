"""The judge reaches the same verdicts as the checks run next to the code (autograder/engine/judge.py).

Every implementation the mutation tests use (the reference, each catalogued mistake, the
stub, the alternative correct ones) is served by an endpoint in a thread, as the kernel
serves the learner's names; each visible check and hidden test runs once on the object
itself and once on the judge's stand-in for it, reached through autograder.engine.remote. The
verdicts must be the same, with the same message, except where the judge is documented to
be more lenient (it cannot see an input changed in place): it is never stricter, so an
honest learner never loses a point to it.
"""

import re
import socket
import threading
from types import SimpleNamespace
from unittest import mock

import pytest
import torch
from jupyter_client.manager import AsyncKernelManager
from jupyter_core.utils import run_sync

from autograder import grading
from autograder.checks import CheckFailure
from autograder.engine.judge import Judge, run_test_cell
from autograder.engine.remote import Channel, Endpoint, models_read_only
from autograder.hidden.core import SEED_VARIABLE
from autograder.lessons import EXERCISES
from solutions import libtorch as cpp_reference
from tests.alternatives import ALTERNATIVES
from tests.helpers import (
    CATALOGUE,
    CHECKS,
    CPP_EXERCISES,
    HIDDEN,
    STRUCTURAL_MISTAKES,
    buggy,
    built_wrongly,
    resolved_alternative,
    stub,
)


def _verdict(test, implementation) -> str | None:
    try:
        test(implementation)
    except CheckFailure as failure:
        # the words, not the numbers or where the values are wrong: a mistake that drops out at
        # random is wrong at other places in each run
        words = re.sub(r"wrong values[^.]*\.", "wrong values.", str(failure))
        return re.sub(r"-?\d+(\.\d+)?(e-?\d+)?", "#", words)
    return None


def _verdicts(exercise: str, implementation) -> list[str | None]:
    return [_verdict(test, implementation) for test in (*CHECKS[exercise], *HIDDEN[exercise])]


def _judged(exercise: str, implementation) -> list[str | None]:
    """The verdicts with the test cells' own names where the judge finds them: the grader's
    imports here; the exercise and every other name the notebook imports (``torch``, the
    ``Transformer`` that train_step's check builds) in the kernel, reached through handles."""
    lesson = next(lesson for lesson, names in EXERCISES.items() if exercise in names)
    notebook_names = {
        name: value
        for name, value in grading.lesson_imports(lesson).items()
        if name not in grading.grading_imports(lesson)
    }
    ours, theirs = socket.socketpair()
    kernel = Endpoint(Channel(theirs), {**notebook_names, exercise: implementation})
    thread = threading.Thread(target=kernel.serve, daemon=True)
    thread.start()
    judge = Endpoint(Channel(ours), guard=models_read_only)
    try:
        handles = {name: judge.request("get", name=name) for name in notebook_names}
        with mock.patch.dict(grading.lesson_imports(lesson), handles):  # what grading.run binds
            return _verdicts(exercise, judge.request("get", name=exercise))
    finally:
        judge.say_goodbye()
        thread.join(timeout=10)


def _same_or_lenient(here: list[str | None], judged: list[str | None], in_place: bool) -> None:
    """The same verdicts and messages; for code that changes its inputs in place (which the
    judge's copies hide, and which the checks next to the code see in later checks too), only
    never stricter."""
    for near, far in zip(here, judged, strict=True):
        if near is None:
            assert far is None, f"the judge failed what passes next to the code: {far}"
        elif not in_place:
            assert far == near, (near, far)


CASES = [(e, "reference", None) for e in sorted(CHECKS)]
CASES += [(e, "stub", None) for e in sorted(CHECKS)]
CASES += [(e, "mistake", m) for e, mistakes in CATALOGUE.items() for m in mistakes]
CASES += [(e, "alternative", a) for e, alts in ALTERNATIVES.items() for a in alts]
CASES += [(e, "structural", (name, change)) for e, name, change, _ in STRUCTURAL_MISTAKES]


def _implementation(exercise: str, kind: str, which):
    import solutions

    if kind == "reference":
        if exercise in CPP_EXERCISES:  # lesson 12: the reference's C++, built as its exercise cell builds it
            return cpp_reference.build()[exercise.removeprefix("Cpp")]
        return getattr(solutions, exercise)
    if kind == "stub":
        return stub(exercise)
    if kind == "mistake":
        return buggy(exercise, which)
    if kind == "structural":
        return built_wrongly(exercise, which[1])
    return resolved_alternative(exercise, which)


@pytest.mark.parametrize(
    ("exercise", "kind", "which"),
    CASES,
    ids=[
        f"{e}-{k}-{w[0] if k == 'structural' else getattr(w, 'name', getattr(w, '__name__', ''))}"
        for e, k, w in CASES
    ],
)
def test_the_judge_agrees_with_the_checks(exercise, kind, which, monkeypatch):
    monkeypatch.setenv("COURSE_HIDDEN_SEED", "20261201")  # the hidden tests draw the same values twice
    implementation = _implementation(exercise, kind, which)
    in_place = kind == "mistake" and "in place" in which.name
    _same_or_lenient(_verdicts(exercise, implementation), _judged(exercise, implementation), in_place)


def _served(namespace: dict) -> Endpoint:
    """The judge's endpoint to ``namespace``, served as a kernel serves it, in a thread."""
    ours, theirs = socket.socketpair()
    threading.Thread(target=Endpoint(Channel(theirs), namespace).serve, daemon=True).start()
    return Endpoint(Channel(ours), guard=models_read_only)


def test_the_judges_run_draws_the_seed_it_is_given(monkeypatch):
    """Whatever the grader's own environment says: the seed is the one the kernel was given."""
    monkeypatch.setenv(SEED_VARIABLE, "5")
    source = "from autograder.hidden.core import Fresh\nassert Fresh().seed == 1234, Fresh().seed"
    assert run_test_cell(source, "test_seed", {}, _served({}), seed=1234) is None


class _ParameterByName:
    """A learner's class that names itself after torch's Parameter."""


_ParameterByName.__module__, _ParameterByName.__qualname__ = "torch.nn.parameter", "Parameter"


def test_a_value_that_claims_a_tensor_class_fails_the_cell_with_the_judges_reason():
    """Refused by design, with its reason (it once ended in a RecursionError inside the judge)."""
    test = grading.table("03_attention")[0]

    def attention(*args, **kwargs):
        return _ParameterByName(), _ParameterByName()

    endpoint = _served({test.exercise: attention})
    verdict = run_test_cell(test.visible, test.grade_id, grading.grading_imports("03_attention"), endpoint, 1)
    endpoint.say_goodbye()
    assert verdict is not None and verdict.startswith("the kernel sent the judge something it refuses: ")
    assert "claims to be a torch.nn.parameter.Parameter" in verdict and "Recursion" not in verdict


@pytest.fixture
def kernel():
    """A kernel of the course's environment, as nbgrader's Execute step holds it (km, kc, timeout)."""
    manager = AsyncKernelManager(kernel_name="python3")
    run_sync(manager.start_kernel)()
    client = manager.client()
    client.start_channels()
    run_sync(client.wait_for_ready)(timeout=120)
    yield SimpleNamespace(km=manager, kc=client, timeout=60)
    client.stop_channels()
    run_sync(manager.shutdown_kernel)(now=True)


def test_the_judge_keeps_its_seed_from_the_kernel(kernel, tmp_path, monkeypatch):
    """The judge's hidden tests draw from a seed of its own, new for every notebook, whatever
    COURSE_HIDDEN_SEED says in the grader's environment (which the kernel sees, as here): the kernel
    never holds it, so the judge's inputs are none the notebook saw (tests/test_hostile_replay.py)."""
    monkeypatch.setenv(SEED_VARIABLE, "20261201")
    given = f"import os\nos.environ[{SEED_VARIABLE!r}] = '20261201'"  # the sandbox passes COURSE_*
    run_sync(kernel.kc.execute_interactive)(given, timeout=60)
    judge = Judge(kernel, "03_attention", tmp_path)
    cell = "from autograder.hidden.core import Fresh\nkernel_seed, known = Fresh().seed, str(os.environ)"
    run_sync(kernel.kc.execute_interactive)(cell, timeout=60)
    drawn = "from autograder.hidden.core import Fresh\nassert Fresh().seed != kernel_seed, Fresh().seed"
    assert judge.verdict(drawn, "test_seed") is None
    assert judge.verdict("assert kernel_seed == 20261201", "test_seed") is None
    assert judge.verdict(f"assert {str(judge.seed)!r} not in known", "test_seed") is None
    other = Judge(kernel, "03_attention", None)  # the next notebook's judge draws another seed
    assert other.seed != judge.seed
    for made in (judge, other):
        made.close(SimpleNamespace(metadata={}))


def test_the_judge_also_tells_a_causal_mask_that_ignores_its_device():
    """Asked through the protocol for a mask on 'meta', the kernel's mask that ignores ``device``
    comes back on the CPU and is named; the reference's meta mask cannot cross (it holds no
    values), which says nothing, as in the notebook."""

    def on_the_cpu(size, device=None):
        return torch.ones(size, size, dtype=torch.bool).tril()

    import solutions

    judged = [verdict for verdict in _judged("causal_mask", on_the_cpu) if verdict is not None]
    assert judged and "the device argument is not used" in judged[0], judged
    assert _judged("causal_mask", solutions.causal_mask) == _verdicts("causal_mask", solutions.causal_mask)
