"""The independent judge: every test cell run again where the learner's code cannot reach.

A notebook's test cells run in the grading kernel, next to the learner's code, which can
replace the checks, ``torch.allclose`` or anything else they use. So after the notebook
has run, the judge runs each test cell once more in the grader's own process, which never
executes learner code: the checks and hidden tests are imported here, and the learner's
definitions (``MultiHeadAttention``, ``greedy_decode``, ...) are reached in the kernel
through ``autograder.remote``, by sending inputs and receiving outputs as data.

The points need both verdicts. A test cell that passed in the notebook and fails here gets
the judge's failure as an error output (so nbgrader scores it 0 and the feedback says why),
and the notebook's metadata records it under ``JUDGE_METADATA`` for the instructor's report
("tampering suspected"). A cell that failed in the notebook stays failed. The judge is
deliberately no stricter than the notebook: where it cannot see something (an input
changed in place, two layers sharing one tensor), it lets the notebook's verdict stand.
"""

import ast
import builtins
import contextlib
import io
import socket
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from queue import Empty

import nbformat
from jupyter_core.utils import run_sync
from nbformat import NotebookNode

from autograder import lessons
from autograder.remote import Channel, Endpoint, models_read_only

JUDGE_METADATA = "course_judge"
CONNECT_TIMEOUT_S = 20  # for the kernel to start serving; it is idle, so this is generous
SERVE = "__import__('autograder.remote', fromlist=['serve']).serve({path!r}, globals())"


def test_cells(nb: NotebookNode) -> Iterator[NotebookNode]:
    """The graded test cells: code cells with points that are not solution cells."""
    for cell in nb.cells:
        meta = cell.metadata.get("nbgrader", {})
        if cell.cell_type == "code" and meta.get("grade") and not meta.get("solution"):
            yield cell


def grading_imports(lesson: str) -> dict:
    """The names a lesson's test cells use from the grading code (``checks``), bound here.

    They come from the import statements of the lesson's locked cells in its source notebook
    (the instructor's copy, never the submission), for modules of the ``autograder`` package.
    """
    namespace: dict = {"__builtins__": builtins}
    nb = nbformat.read(lessons.source_path(lesson), as_version=4)
    for cell in nb.cells:
        if cell.cell_type != "code" or not cell.metadata.get("nbgrader", {}).get("locked"):
            continue
        for node in ast.parse(cell.source).body:
            module = node.module if isinstance(node, ast.ImportFrom) else None
            if module and module.split(".")[0] == "autograder":
                exec(compile(ast.Module([node], []), lesson, "exec"), namespace)  # noqa: S102 - our own source
    return namespace


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


def run_test_cell(source: str, grade_id: str, namespace: dict, endpoint: Endpoint) -> str | None:
    """None when the test cell passes against the learner's code at ``endpoint``, else why not."""
    names = _LearnerNames(endpoint, namespace)
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            exec(compile(source, f"<test cell {grade_id}>", "exec"), dict(namespace), names)  # noqa: S102
    except TimeoutError:
        return "the learner's code did not answer the judge in time"
    except ConnectionError:
        return "the kernel went away while the judge ran this test"
    except Exception as error:  # noqa: BLE001 - a failing check, or the learner's code raising
        return f"{type(error).__name__}: {error}" if type(error).__name__ != "CheckFailure" else str(error)
    return None


class KernelSession:
    """The judge's connection to one grading kernel, one test cell at a time.

    ``executor`` is nbgrader's Execute step holding the kernel (``km``, ``kc``) after the
    notebook's cells ran. For each test cell the kernel is asked to serve its names on a
    Unix socket in ``folder`` (the sandbox's private folder, which the kernel can reach);
    the judge runs the cell, says goodbye, and waits for the kernel to be idle again.
    """

    def __init__(self, executor, folder: Path, timeout_s: float):
        self.executor, self.timeout_s = executor, timeout_s
        self.path = str(folder / "judge.sock")
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.listener.bind(self.path)
        self.listener.listen(1)

    def close(self) -> None:
        self.listener.close()
        Path(self.path).unlink(missing_ok=True)

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

    def judge(self, source: str, grade_id: str, namespace: dict) -> str | None:
        msg_id = self.executor.kc.execute(SERVE.format(path=self.path), silent=True, store_history=False)
        self.listener.settimeout(CONNECT_TIMEOUT_S)
        try:
            connection, _ = self.listener.accept()
        except TimeoutError:
            connection = None
        if connection is None:
            verdict = "the kernel did not start answering the judge (its serving code was broken or replaced)"
        else:
            channel = Channel(connection)
            channel.deadline = time.monotonic() + self.timeout_s
            endpoint = Endpoint(channel, guard=models_read_only)
            verdict = run_test_cell(source, grade_id, namespace, endpoint)
            with contextlib.suppress(OSError):
                endpoint.say_goodbye()
            connection.close()
        if not self._wait_idle(msg_id, 5) and run_sync(self.executor.km.is_alive)():
            run_sync(self.executor.km.interrupt_kernel)()  # stuck in the learner's code: stop it
            self._wait_idle(msg_id, 10)
        return verdict


def judge(executor, nb: NotebookNode, lesson: str, folder: Path | None) -> dict[str, str | None]:
    """Each test cell's grade_id -> None (passed) or the judge's reason for failing it."""
    namespace = grading_imports(lesson)
    with tempfile.TemporaryDirectory(prefix="course-judge-") as scratch:
        session = KernelSession(executor, folder or Path(scratch), timeout_s=executor.timeout or 60)
        try:
            return {
                cell.metadata.nbgrader["grade_id"]: session.judge(
                    cell.source, cell.metadata.nbgrader["grade_id"], namespace
                )
                for cell in test_cells(nb)
            }
        finally:
            session.close()


def _passed_in_notebook(cell: NotebookNode) -> bool:
    return not any(output.output_type == "error" for output in cell.outputs)


def overrule(nb: NotebookNode, verdicts: dict[str, str | None]) -> dict[str, str]:
    """Fail, with the judge's reason, each test cell that passed in the notebook and not here;
    record them in the notebook's metadata. Returns grade_id -> reason for those cells."""
    overruled = {}
    for cell in test_cells(nb):
        grade_id = cell.metadata.nbgrader["grade_id"]
        reason = verdicts.get(grade_id)
        if reason is None or not _passed_in_notebook(cell):
            continue
        overruled[grade_id] = reason
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
    nb.metadata[JUDGE_METADATA] = {"overruled": overruled}
    return overruled


def lesson_of(resources: dict) -> str | None:
    """The lesson being graded, from nbgrader's resources; None for a notebook of no lesson."""
    lesson = (resources or {}).get("nbgrader", {}).get("assignment")
    return lesson if lesson in lessons.EXERCISES and lessons.source_path(lesson).exists() else None
