"""Record and replay against the judge (issue 31, attack 2), and the answers the checks leave in reach.

The attacker hands in a wrong ``scaled_dot_product_attention`` that, during the notebook's own
run, takes the right answer from the checks' stack frames (``compare``'s ``expected`` local, or
the checks module's ``expected_attention`` through a caller's globals), keeps it by the inputs' bytes, and
returns it whenever it is called with the same inputs again, as the judge does when it runs the
test cells on the same inputs. Graded here as the pipeline grades a notebook: its cells run in a
real kernel, each test cell is judged right after it ran (``Judge.verdict``), and a cell earns its
points when it passed in the notebook and the judge did not overrule it.

Before, the judge handed the kernel its hidden seed: full marks, nothing overruled. Now the judge
draws a seed the kernel never sees, so every cell with hidden tests is overruled. A cell with only
visible checks on fixed inputs stays replayable where the answer was computed by the checks' own
oracle, which learner code can always reach (see the report of issue 31).

The second half proves that no check leaves an expected value where the learner's code could read
it while it runs (a caller's frame, a checks module's globals): a spy in place of the reference
looks for its own correct answer there on every call.
"""

import contextlib
import inspect
import sys
from collections.abc import Iterator
from types import SimpleNamespace

import pytest
import torch
from jupyter_client.manager import AsyncKernelManager
from jupyter_core.utils import run_sync

from autograder import grading
from autograder.checks import attention
from autograder.engine.judge import Judge
from autograder.hidden.core import SEED_VARIABLE
from tests.helpers import CHECKS, HIDDEN

LESSON = "03_attention"
IMPORTS = "import sys\nimport torch\nfrom autograder.checks import attention as checks\n"

# the learner's wrong answer (no 1 / sqrt(d_k)), masks handled right
WRONG = """
def _no_scaling(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1).nan_to_num(0.0)
    return weights @ v, weights


def scaled_dot_product_attention(q, k, v, mask=None, dropout_p=0.0):
    return _no_scaling(q, k, v, mask)
"""

REPLAY = (
    WRONG
    + """
_answers = {}


def _key(*tensors):
    return tuple((tuple(t.shape), t.detach().cpu().numpy().tobytes()) for t in tensors if t is not None)


def scaled_dot_product_attention(q, k, v, mask=None, dropout_p=0.0):
    key = _key(q, k, v, mask)
    frame = sys._getframe(1)
    while frame is not None and key not in _answers:
        found = frame.f_locals.get("expected")
        if isinstance(found, tuple) and len(found) == 2:
            _answers[key] = tuple(t.clone() for t in found)
        elif callable(frame.f_globals.get("expected_attention")):
            _answers[key] = frame.f_globals["expected_attention"](q, k, v, mask)
        frame = frame.f_back
    if key in _answers:
        return tuple(t.clone() for t in _answers[key])
    return _no_scaling(q, k, v, mask)
"""
)


@contextlib.contextmanager
def _kernel() -> Iterator[SimpleNamespace]:
    """A kernel of the course's environment, as nbgrader's Execute step holds it (km, kc, timeout)."""
    manager = AsyncKernelManager(kernel_name="python3")
    run_sync(manager.start_kernel)()
    client = manager.client()
    client.start_channels()
    try:
        run_sync(client.wait_for_ready)(timeout=120)
        yield SimpleNamespace(km=manager, kc=client, timeout=60)
    finally:
        client.stop_channels()
        run_sync(manager.shutdown_kernel)(now=True)


def _runs(kernel: SimpleNamespace, code: str) -> bool:
    """Run a cell in the kernel; whether it ended without an error."""
    reply = run_sync(kernel.kc.execute_interactive)(code, timeout=120)
    return reply["content"]["status"] == "ok"


def _earned(solution: str, seed_handed_over: bool, folder) -> dict[str, float]:
    """grade id -> the points each test cell of lesson 03 earns ``solution``: its cells run in a
    kernel, each test cell judged right after it ran. ``seed_handed_over``: the stand-in for the
    judge before this defence, which had the kernel draw its hidden tests from the judge's seed."""
    earned = {}
    with _kernel() as kernel:
        judge = Judge(kernel, LESSON, folder)
        try:
            if seed_handed_over:
                assert _runs(kernel, f"import os\nos.environ[{SEED_VARIABLE!r}] = {str(judge.seed)!r}")
            assert _runs(kernel, IMPORTS + solution)
            for test in grading.table(LESSON):
                source = f"{test.visible}\n{test.hidden}"
                passed_here = _runs(kernel, source)
                passed_there = judge.verdict(source, test.grade_id) is None
                earned[test.grade_id] = test.points if passed_here and passed_there else 0.0
        finally:
            judge.close(SimpleNamespace(metadata={}))
    return earned


def _hidden_tested() -> set[str]:
    return {test.grade_id for test in grading.table(LESSON) if test.hidden}


def test_the_replay_forged_full_marks_while_the_judge_handed_the_kernel_its_seed(tmp_path):
    earned = _earned(REPLAY, seed_handed_over=True, folder=tmp_path)
    assert sum(earned.values()) == sum(test.points for test in grading.table(LESSON)) == 6


def test_the_replay_earns_nothing_where_the_judge_draws_inputs_of_its_own(tmp_path):
    replayed = _earned(REPLAY, seed_handed_over=False, folder=tmp_path)
    wrong = _earned(WRONG, seed_handed_over=False, folder=tmp_path)
    assert _hidden_tested() == {
        "test_scaled_dot_product_attention_values",
        "test_scaled_dot_product_attention_mask",
        "test_scaled_dot_product_attention_fully_masked",
    }
    for grade_id in _hidden_tested():
        assert replayed[grade_id] == wrong[grade_id] == 0.0, grade_id
    # the shapes alone, a cell of visible checks only, whose points every output of the right
    # shape earns: the replay earns what the wrong answer earns, and nothing more
    assert sum(replayed.values()) == sum(wrong.values()) == 1.0


# ---------------------------------------------------------------- no answer within the learner's reach


def _tensors(value, depth: int = 0) -> Iterator[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        yield value
    elif depth < 3 and isinstance(value, tuple | list):
        for item in value:
            yield from _tensors(item, depth + 1)
    elif depth < 3 and isinstance(value, dict):
        for item in value.values():
            yield from _tensors(item, depth + 1)


class _Spy:
    """Wraps the reference: on every call, looks through the callers' frames (their locals, and the
    globals of the grading code's modules) for a tensor equal to its own correct answer that is
    neither an input nor something it returned before; ``found`` says where."""

    def __init__(self) -> None:
        self.found: list[str] = []
        self.returned: list[torch.Tensor] = []

    def __call__(self, fn):
        def spied(*args, **kwargs):
            result = fn(*args, **kwargs)
            answers = [t for t in _tensors(result) if t.numel() > 1]
            inputs = [t for value in (*args, *kwargs.values()) for t in _tensors(value)]
            frame = sys._getframe(1)
            while frame is not None:
                self._look(frame, answers, inputs)
                frame = frame.f_back
            self.returned += answers
            return result

        return spied

    def _look(self, frame, answers: list[torch.Tensor], inputs: list[torch.Tensor]) -> None:
        module = frame.f_globals.get("__name__", "")
        places = [(f"local {name}", value) for name, value in frame.f_locals.items()]
        if module.startswith("autograder"):
            places += [(f"global {name}", value) for name, value in frame.f_globals.items()]
        for place, value in places:
            for tensor in _tensors(value):
                if self._known(tensor, inputs) or self._known(tensor, self.returned, storage=True):
                    continue
                if any(_equal(tensor, answer) for answer in answers):
                    self.found.append(f"{module}.{frame.f_code.co_name}: {place}")

    @staticmethod
    def _known(tensor: torch.Tensor, others: list[torch.Tensor], storage: bool = False) -> bool:
        if storage:
            return any(tensor.data_ptr() == other.data_ptr() for other in others)
        return any(tensor is other or _equal(tensor, other) for other in others)


def _equal(a: torch.Tensor, b: torch.Tensor) -> bool:
    """The same values (for floats, as close as two oracles computing the same thing get)."""
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if a.is_floating_point():
        return torch.allclose(a.detach(), b.detach(), rtol=1e-6, atol=1e-9, equal_nan=True)
    return torch.equal(a.detach(), b.detach())


def _spied_on(spy: _Spy, exercise: str):
    """The reference's function, or its class with every method of its own spied on (what the
    learner's code returns from encode or decode is its own, not an answer of the checks')."""
    import solutions

    reference = getattr(solutions, exercise)
    if not isinstance(reference, type):
        return spy(reference)
    methods = {name: spy(method) for name, method in vars(reference).items() if inspect.isfunction(method)}
    methods.pop("__init__", None)
    return type(f"Spied{exercise}", (reference,), methods)


# every exercise whose answers are tensors, but lesson 12's C++ ones (autograder/checks/libtorch.py's);
# rate's are numbers, and train_step's and train_loop's are losses and trained weights
NOT_TENSORS = {"rate", "train_step", "train_loop"}
EXERCISES = sorted(e for e in CHECKS if not e.startswith("Cpp") and e not in NOT_TENSORS)
# checks whose answer is their own input, by design: merge_heads(split_heads(x)) must give x back
ROUND_TRIPS = {"test_merge_heads_round_trip"}


@pytest.mark.parametrize("exercise", EXERCISES)
def test_no_check_leaves_an_answer_where_the_learners_code_runs(exercise):
    spy = _Spy()
    implementation = _spied_on(spy, exercise)
    for check in (*CHECKS[exercise], *HIDDEN.get(exercise, ())):
        if check.args[0].grade_id not in ROUND_TRIPS:  # the test cell's (grading.run's arguments)
            check(implementation)
    assert spy.found == []


def test_the_spy_finds_an_answer_computed_before_the_learners_call(monkeypatch):
    """The stand-in for the checks before this defence: compare computed its answer first."""
    compare = attention.compare

    def answer_first(fn, q, k, v, mask=None, oracle=None):
        expected = (oracle or attention.expected_attention)(q, k, v, mask)
        compare(fn, q, k, v, mask, oracle=lambda *inputs: expected)

    monkeypatch.setattr(attention, "compare", answer_first)
    spy = _Spy()
    for check in HIDDEN["scaled_dot_product_attention"]:
        check(_spied_on(spy, "scaled_dot_product_attention"))
    assert any("answer_first: local expected" in place for place in spy.found), spy.found
