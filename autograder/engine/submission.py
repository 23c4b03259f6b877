"""One submission graded, and its verdict as a value: the engine's bottom layer.

``grade(setup, lesson, student)`` runs nbgrader's autograde step for one student's lesson,
with the course's configuration (``Setup.config``: the sandboxed kernel, the judge, the steps
that follow no link), and returns a ``Graded``: the points of every test cell, what went
wrong (``Problem`` lines for the instructor's report), the shortcuts flagged in the
submitted code, and the judge's record. Everything in it comes from the objects the grading
just made (the graded notebooks and the exception that stopped it, kept by
``CourseAutograde``), not from nbgrader's log or the files it wrote.

The pipeline's sequential loop, the worker processes, the Dask workers and the Formgrader's
Autograde button all grade through this function, by ``verdicts.grade``, which records the
verdict (autograder/engine/verdicts.py).
"""

import functools
import logging
import os
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import nbformat
import sqlalchemy.exc
from nbformat import NotebookNode
from nbgrader.coursedir import CourseDirectory
from nbgrader.utils import determine_grade, is_grade
from traitlets.config import Config

from autograder.engine import workspace as layout
from autograder.engine.cpp_cache import prebuild, shared_cache
from autograder.engine.execute import GradingStopped
from autograder.engine.flags import Flag, flags
from autograder.engine.judge import JUDGE_METADATA
from autograder.engine.kernels.sandbox import Limits
from autograder.engine.kernels.sandbox import problem as sandbox_problem
from autograder.engine.limit_errors import limit_lines
from autograder.engine.nbgrader_config import course_config
from autograder.engine.nbgrader_steps import CourseAutograde
from autograder.engine.plain_text import report_line
from autograder.engine.submission_files import FILES_METADATA
from autograder.engine.workspace import Key


@dataclass(frozen=True)
class Setup:
    """Everything that makes grading grade as it does: picklable, so that a worker process or a
    Dask worker grades exactly as the instructor's process would."""

    workspace: Path
    release: Path
    cell_timeout_s: int
    sandbox: Limits | None
    run_everything: bool
    db_url: str
    warm: bool

    def config(self) -> Config:
        """nbgrader's configuration for this Setup (autograder/engine/nbgrader_config.py), whose
        parameters are this Setup's fields, by name."""
        return course_config(**vars(self))


@dataclass(frozen=True)
class Problem:
    """A submission that could not be graded as handed in, and why. Its text is hostile (a
    kernel's error message, the name of a file or folder an upload chose), so each field holds
    one line of it (``plain_text.report_line``): whatever it held, it shows as one report line,
    about its own student."""

    student: str
    lesson: str
    what: str

    def __post_init__(self) -> None:
        for name in ("student", "lesson", "what"):
            object.__setattr__(self, name, report_line(getattr(self, name)))


# Where a grading's time goes besides nbgrader's own steps: lesson 12's trusted builds, then the
# execute step's parts (execute.SECONDS)
STEPS = ("C++ builds", "zygote start", "kernel start", "cells", "kernel stop")


@dataclass(frozen=True)
class Graded:
    """One submission graded: its points per test cell (grade id -> (score, max score)), what
    went wrong with it (if anything), the shortcuts flagged in its code, the test cells the
    judge overruled (grade id -> the judge's reason), what the judge saw of each test cell
    (grade id -> whether its visible check and hidden tests passed, and the catalogued mistakes
    named: ``Judge.seen``), and how long it took: in all (``seconds``), judging, and in the steps
    of ``STEPS`` (the rest is nbgrader's own: its converter, preprocessors, gradebook and copies)."""

    lesson: str
    student: str
    scores: dict[str, tuple[float, float]]
    problems: list[Problem]
    flags: list[Flag] = field(default_factory=list)
    overruled: dict[str, str] = field(default_factory=dict)
    seen: dict[str, dict] = field(default_factory=dict)
    seconds: float = 0.0
    judge_seconds: float = 0.0
    failure: str | None = None  # why grading stopped, when it did: no score was recorded
    # the failure is the grader's own (the sandbox, the kernel's start, its imports), not the
    # submission's (a kernel it ended, a cell that ignored the time limit's interrupt)
    grader_failed: bool = False
    steps: dict[str, float] = field(default_factory=dict)  # step of STEPS -> seconds

    @property
    def score(self) -> tuple[float, float]:
        """(points, most points) over the submission's test cells."""
        return sum(s for s, _ in self.scores.values()), sum(m for _, m in self.scores.values())


def grader_failed(error: BaseException) -> bool:
    """Whether ``error``, which stopped a grading, is the grader's fault: anything but the
    kernel stopping at a cell of the submission (``GradingStopped``)."""
    return not isinstance(error, GradingStopped)


def failure_reason(error: BaseException) -> str:
    """What stopped a grading run, in a line: the course's own words when the kernel stopped
    (``GradingStopped`` names the cell), else the error's type and first line."""
    if isinstance(error, GradingStopped):
        return str(error)[:240]
    first = str(error).strip().splitlines()[0] if str(error).strip() else ""
    return f"{type(error).__name__}: {first}"[:240] if first else type(error).__name__


@functools.cache
def _sandbox_problem() -> str | None:
    return sandbox_problem()


# nbgrader's gradebook warns, when it records a submission's timestamp.txt, about objects that are
# not in its session; the grades are recorded all the same. Here, so that worker processes (which
# import this module, not the pipeline) are quiet too.
warnings.filterwarnings("ignore", category=sqlalchemy.exc.SAWarning)

_QUIET = logging.getLogger("autograder.grading")  # nbgrader's log: its failures come back as values
_QUIET.addHandler(logging.NullHandler())
_QUIET.propagate = False


def _autograde(setup: Setup, lesson: str, student: str) -> CourseAutograde:
    """nbgrader's autograde step for one submission, as the course configures it, run here."""
    config = setup.config()
    coursedir = CourseDirectory(config=config, assignment_id=lesson, student_id=student)
    app = CourseAutograde(coursedir=coursedir, config=config, log=_QUIET)
    app.force = True
    app.create_student = True
    try:
        app.start()
    except Exception as error:  # noqa: BLE001 - nbgrader's own failure; the first cause is kept
        app.failure = app.failure or error
    return app


def _timed_out(nb: NotebookNode) -> list[str]:
    """Cells that nbgrader interrupted at the time limit."""
    return [
        cell.metadata.get("nbgrader", {}).get("grade_id", f"cell {index}")
        for index, cell in enumerate(nb.cells)
        if any(output.get("ename") == "CellTimeoutError" for output in cell.get("outputs", []))
    ]


def grade(setup: Setup, lesson: str, student: str) -> Graded:
    """Autograde one submission (``<workspace>/submitted/<student>/<lesson>/``) and return its verdict."""
    start = time.perf_counter()
    # the kernels and the judge compute on the CPU: a sandboxed kernel sees no GPU
    os.environ.setdefault("COURSE_DEVICE", "cpu")
    folder = layout.submission(setup.workspace, Key(student, lesson))
    flagged = [flag for path in sorted(folder.glob("*.ipynb")) for flag in flags(nbformat.read(path, 4))]
    problems = [Problem(student, lesson, f"flagged, cell {flag.cell}: {flag.reason}") for flag in flagged]

    def failed(failure: str, ours: bool) -> Graded:
        whose = " (the grader's fault, not the submission's: no score)" if ours else ""
        problems.append(Problem(student, lesson, f"autograding failed{whose}: {failure}"))
        seconds = time.perf_counter() - start
        return Graded(
            lesson, student, {}, problems, flagged, seconds=seconds, failure=failure, grader_failed=ours
        )

    if setup.sandbox is not None and (reason := _sandbox_problem()) is not None:
        return failed(f"cannot grade in the sandbox on this machine: {reason}", ours=True)
    building = time.perf_counter()
    if setup.sandbox is not None:  # lesson 12's C++, built by the grader where kernels only read it
        cache = shared_cache(setup.workspace)  # each build within its cell's time, counted in this grade's
        prebuild(folder, lesson, cache, setup.sandbox, setup.cell_timeout_s, hidden=(setup.workspace,))
    steps = {"C++ builds": time.perf_counter() - building}
    app = _autograde(setup, lesson, student)
    steps |= {step: app.seconds[step] for step in STEPS[1:]}
    if app.failure is not None:
        return failed(failure_reason(app.failure), grader_failed(app.failure))

    scores, overruled, seen, judge_seconds = {}, {}, {}, 0.0
    for nb in app.graded:
        for cell in nb.cells:
            if is_grade(cell):
                scores[cell.metadata.nbgrader["grade_id"]] = determine_grade(cell)
        record = nb.metadata.get(JUDGE_METADATA, {})
        overruled |= record.get("overruled", {})
        seen |= record.get("seen", {})
        judge_seconds += record.get("seconds", 0.0)
    timed_out = [cell for nb in app.graded for cell in _timed_out(nb)]
    if timed_out:
        cells = ", ".join(timed_out)
        what = f"cells stopped after {setup.cell_timeout_s} s (an endless loop?), scored 0: {cells}"
        problems.append(Problem(student, lesson, what))
    for cell, reason in overruled.items():
        verdict = f"passed in the notebook, not before the judge: {reason}"
        problems.append(Problem(student, lesson, f"tampering suspected, cell {cell}: {verdict}"))
    problems += [
        Problem(student, lesson, line) for nb in app.graded for line in nb.metadata.get(FILES_METADATA, [])
    ]
    if setup.sandbox is not None:  # cells that met a cap of the sandbox's: which, in the course's words
        problems += [
            Problem(student, lesson, line) for nb in app.graded for line in limit_lines(nb, setup.sandbox)
        ]
    seconds = time.perf_counter() - start
    return Graded(
        lesson, student, scores, problems, flagged, overruled, seen, seconds, judge_seconds, steps=steps
    )
