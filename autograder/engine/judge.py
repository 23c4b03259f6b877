"""The independent judge: every test cell run again where the learner's code cannot reach.

A notebook's test cells run in the grading kernel, next to the learner's code, which can
replace the checks, ``torch.allclose`` or anything else they use. So the judge runs each
test cell once more in the grader's own process, which never executes learner code: the
checks and hidden tests are imported here, and the learner's definitions
(``MultiHeadAttention``, ``greedy_decode``, ...) are reached in the kernel through
``autograder.engine.remote``, by sending inputs and receiving outputs as data.

The judge runs each test cell right after the notebook ran it, so it sees the learner's
definitions as that cell saw them. The points need both verdicts: a test cell that passed in
the notebook and fails here gets the judge's failure as an error output (nbgrader scores it
0, and the feedback says why), and the notebook's metadata records it under
``JUDGE_METADATA`` for the instructor's report ("tampering suspected"). A cell that failed
in the notebook stays failed. The judge is deliberately no stricter than the notebook: where
it cannot see something (an input changed in place), the notebook's verdict stands.

The two runs do not share their random inputs: the judge draws a seed of its own for its runs of
the hidden tests (``judge_seed``), from the operating system, never from the grader's environment
(which the kernel partly sees) and never handed to the kernel. So a hidden test gives the judge
sizes and values the kernel has never seen, and an answer recorded during the notebook's own run
(the checks' expected values, read from their frames) cannot be replayed to the judge. The
hidden tests are written so that an honest answer gets the same verdict for every seed (where a
verdict would depend on a drawn choice, Pre-LN or Post-LN, they test both), so the two runs
agree for honest code (tests/test_honest_flags.py). The learner's exercises call each other in
the kernel, in both runs: the judge reaches only the name the test cell uses.
"""

import builtins
import contextlib
import io
import secrets
import socket
import tempfile
import time
from pathlib import Path
from queue import Empty

import nbformat
from jupyter_core.utils import run_sync
from nbformat import NotebookNode

from autograder.checks.core import CheckFailure, naming_noted
from autograder.checks.device import exact_matmul
from autograder.engine.remote import Channel, Endpoint, Refused, models_read_only
from autograder.grading import HIDDEN_BLOCK, grading_imports, lesson_of, table
from autograder.hidden.core import seeded

JUDGE_METADATA = "course_judge"
CONNECT_TIMEOUT_S = 20  # for the kernel to start serving; it is idle, so this is generous
# the kernel's side of the judge's connection: the learner's code computes with TF32 off, as the checks do
SERVE = (
    "__import__('autograder.engine.remote', fromlist=['serve']).serve({path!r}, globals(), "
    "__import__('autograder.checks.device', fromlist=['exact_matmul']).exact_matmul)"
)
JUDGE_SEED_BITS = 63  # torch.Generator takes any seed below 2**64; too many to search from the kernel


def judge_seed() -> int:
    """A seed for the judge's runs of the hidden tests: new for every notebook, from the operating
    system, whatever COURSE_HIDDEN_SEED says (the kernel sees the grader's COURSE_ variables)."""
    return secrets.randbits(JUDGE_SEED_BITS)


class _LearnerNames(dict):
    """A test cell's local names: its own imports here; any other name not known here is
    looked up in the kernel, where the learner defined it."""

    def __init__(self, endpoint: Endpoint, known: dict):
        super().__init__()
        self.endpoint, self.known = endpoint, known

    def __missing__(self, name: str):
        if name in self.known or hasattr(builtins, name):
            raise KeyError(name)  # Python goes on to the globals and the builtins
        try:
            return self.endpoint.request("get", name=name)
        except NameError:
            raise KeyError(name) from None


def run_test_cell(
    source: str,
    grade_id: str,
    namespace: dict,
    endpoint: Endpoint,
    seed: int,
    named: list[str] | None = None,
    unwritten: set[str] | None = None,
    where: list[int] | None = None,
) -> str | None:
    """None when the test cell passes against the learner's code at ``endpoint``, its hidden tests
    drawing from ``seed``, else why not; ``named`` receives the catalogued mistakes the checks named,
    ``unwritten`` the grade id when the cell failed on a stub that still raises NotImplementedError,
    ``where`` the line of the test cell at which it failed (when its traceback shows one)."""
    names = _LearnerNames(endpoint, namespace)
    filename = f"<test cell {grade_id}>"
    try:
        with contextlib.redirect_stdout(io.StringIO()), seeded(seed), naming_noted() as noted:
            try:
                exec(compile(source, filename, "exec"), dict(namespace), names)  # noqa: S102
            except BaseException as error:
                if where is not None:
                    where += _line_in(error, filename)
                raise
            finally:
                if named is not None:
                    named += noted
    except Refused as refusal:
        return f"the kernel sent the judge something it refuses: {refusal}"
    except TimeoutError:
        return "the learner's code did not answer the judge in time"
    except ConnectionError:
        return "the kernel went away while the judge ran this test"
    except CheckFailure as failure:
        if unwritten is not None and _from_a_stub(failure):
            unwritten.add(grade_id)
        return str(failure)
    except Exception as error:  # noqa: BLE001 - the learner's code raising, or a broken check
        if unwritten is not None and _from_a_stub(error):
            unwritten.add(grade_id)
        return f"{type(error).__name__}: {error}"
    return None


def _line_in(error: BaseException, filename: str) -> list[int]:
    """The line of the code compiled as ``filename`` at which ``error`` left it ([] if it did not)."""
    frame = error.__traceback__
    while frame is not None and frame.tb_frame.f_code.co_filename != filename:
        frame = frame.tb_next
    return [] if frame is None else [frame.tb_lineno]


def _from_a_stub(error: BaseException) -> bool:
    """Whether ``error`` is, or was caused by, a NotImplementedError: a stub not written yet."""
    seen: set[int] = set()
    while error is not None and id(error) not in seen:
        if isinstance(error, NotImplementedError):
            return True
        seen.add(id(error))
        error = error.__cause__ or error.__context__
    return False


class Judge:
    """The judge of one notebook while its kernel runs, one test cell at a time.

    ``executor`` is nbgrader's Execute step holding the kernel (``km``, ``kc``). Right after a
    test cell ran, the kernel is asked to serve its names on a Unix socket in ``folder`` (the
    sandbox's private folder, which the kernel can reach); the judge runs the same test cell
    against them, says goodbye and waits for the kernel to be idle again. So the judge sees
    the learner's definitions exactly as the test cell saw them, not as later cells left them.
    Its hidden tests draw from a seed of its own (``judge_seed``), which the kernel never sees.
    """

    def __init__(self, executor, lesson: str, folder: Path | None):
        self.executor = executor
        self.timeout_s = executor.timeout or 60
        self.namespace = grading_imports(lesson)
        self.tests = {test.grade_id: test for test in table(lesson)}
        self._scratch = tempfile.TemporaryDirectory(prefix="course-judge-")
        self.path = str((folder or Path(self._scratch.name)) / "judge.sock")
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.listener.bind(self.path)
        # the kernel may run as another user (autograder/engine/kernels/sandbox.py) and must write to connect;
        # its folder is the kernel's private one, closed to anyone else
        Path(self.path).chmod(0o666)
        self.listener.listen(1)
        self.unanswered: str | None = None
        self.overruled: dict[str, str] = {}
        self.seen: dict[str, dict] = {}  # grade id -> what the judge saw (``seen``), for the class insights
        self.unwritten: set[str] = set()  # grade ids whose cell failed on a stub not written yet
        self.seconds = 0.0  # spent judging, for the instructor's progress line
        self.seed = judge_seed()

    def close(self, nb: NotebookNode) -> None:
        """Record the overruled cells in the notebook's metadata; release the socket."""
        nb.metadata[JUDGE_METADATA] = {
            "overruled": self.overruled,
            "seen": self.seen,
            "seconds": round(self.seconds, 2),
        }
        self.listener.close()
        Path(self.path).unlink(missing_ok=True)
        self._scratch.cleanup()

    def _wait_idle(self, msg_id: str, timeout_s: float) -> bool:
        """Wait for the kernel's reply to ``msg_id``; False when none came in time."""
        deadline = time.monotonic() + timeout_s
        get = run_sync(self.executor.kc.shell_channel.get_msg)
        while (left := deadline - time.monotonic()) > 0:
            try:
                reply = get(timeout=min(left, 1.0))
            except Empty:
                if not run_sync(self.executor.km.is_alive)():
                    return False
                continue
            if reply["parent_header"].get("msg_id") == msg_id:
                return True
        return False

    def verdict(
        self, source: str, grade_id: str, named: list[str] | None = None, where: list[int] | None = None
    ) -> str | None:
        """None when the test cell passes against the kernel's current names, else why not;
        ``named`` receives the catalogued mistakes the checks named, ``where`` the line it failed at."""
        if self.unanswered:  # a kernel that did not answer once is not waited for again
            return self.unanswered
        msg_id = self.executor.kc.execute(SERVE.format(path=self.path), silent=True, store_history=False)
        self.listener.settimeout(CONNECT_TIMEOUT_S)
        try:
            connection, _ = self.listener.accept()
        except TimeoutError:
            connection = None
        if connection is None:
            verdict = "the kernel did not answer the judge (it was stuck, or its serving code was broken)"
            self.unanswered = verdict
        else:
            channel = Channel(connection)
            channel.deadline = time.monotonic() + self.timeout_s
            endpoint = Endpoint(channel, guard=models_read_only, calls_within=exact_matmul)
            unwritten = self.unwritten if named is not None else None
            verdict = run_test_cell(
                source, grade_id, self.namespace, endpoint, self.seed, named, unwritten, where
            )
            with contextlib.suppress(OSError):
                endpoint.say_goodbye()
            connection.close()
        if not self._wait_idle(msg_id, 5) and run_sync(self.executor.km.is_alive)():
            run_sync(self.executor.km.interrupt_kernel)()  # stuck in the learner's code: stop it
            self._wait_idle(msg_id, 10)
        return verdict

    def cell(self, cell: NotebookNode) -> None:
        """Judge a test cell that just ran: if it passed there and fails here, fail it. Either way,
        note what the judge saw of it (``seen``)."""
        grade_id = cell.metadata.nbgrader["grade_id"]
        errors = [output for output in cell.outputs if output.output_type == "error"]
        if any(output.get("ename") == "CellTimeoutError" for output in errors):
            return  # stopped at the time limit: running it again would only wait as long
        start = time.perf_counter()
        named: list[str] = []
        where: list[int] = []
        reason = self.verdict(cell.source, grade_id, named, where)
        self.seen[grade_id] = self._seen(grade_id, cell.source, reason, named, where)
        self.seconds += time.perf_counter() - start
        if reason is None or errors:
            return  # a cell that failed in the notebook stays failed: the judge cannot fail it more
        self.overruled[grade_id] = reason
        cell.outputs.append(
            nbformat.v4.new_output(
                "error",
                ename="JudgeFailure",
                evalue=reason,
                traceback=[
                    "JudgeFailure: this test passed inside your notebook but failed when the grader ran it "
                    f"on your code independently: {reason}"
                ],
            )
        )

    def _seen(
        self, grade_id: str, source: str, reason: str | None, named: list[str], where: list[int]
    ) -> dict:
        """What the judge saw of a test cell (``source``, which failed at line ``where``, if
        it failed): whether its visible check and its hidden tests passed (None: it has none, or
        they did not get to run), the catalogued mistakes named, and whether it failed on a stub
        that still raises NotImplementedError (``unwritten``). When the cell failed and has hidden
        tests, whether its visible check passed tells a wrong answer from one that fits only the
        visible checks (``visible_passed``)."""
        test = self.tests.get(grade_id)
        has_hidden = bool(test and test.hidden)
        if reason is None:
            return {"visible": True, "hidden": True if has_hidden else None, "mistakes": []}
        visible = has_hidden and self.visible_passed(test.visible, grade_id, source, where)
        return {
            "visible": visible,
            "hidden": False if visible else None,
            "mistakes": named,
            "unwritten": grade_id in self.unwritten,
        }

    def visible_passed(self, visible: str, grade_id: str, source: str, where: list[int]) -> bool:
        """Whether the visible check (``visible``) of a test cell that failed at line ``where`` of
        ``source`` passed. Where the hidden block ends the cell, as in every test cell of the
        course, the cell ran the visible check first: it passed when the failure came after it,
        in the hidden block. Otherwise the visible check is run again on its own."""
        block = HIDDEN_BLOCK.search(source)
        if where and block is not None and not source[block.end() :].strip():
            return where[0] > source.count("\n", 0, block.start())
        return self.verdict(visible, grade_id) is None


def for_notebook(executor, resources: dict) -> Judge | None:
    """A judge for the lesson being graded (from nbgrader's resources); None for a notebook that
    is no lesson of the course."""
    lesson = lesson_of(resources)
    return None if lesson is None else Judge(executor, lesson, getattr(executor.km, "judge_folder", None))
