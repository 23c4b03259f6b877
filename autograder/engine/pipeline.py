"""The instructor's pipeline on top of nbgrader: release, collect, autograde, feedback pages.

Each step is a method of ``Pipeline``, which holds one grading workspace (its layout:
autograder/engine/workspace.py), outside the repository's tracked tree. The grades after late
work, their exports and the feedback's late notices are above the engine, in
autograder/instructor/grades.py. Nothing
here re-implements grading: the steps call nbgrader's API with the course's
configuration (autograder/engine/nbgrader_config.py) and add what 200 real submissions need:
a corrupt notebook is reported and skipped without touching the student's other
lessons, a failed grading run is reported with its reason, and progress is printed.
"""

import logging
import os
import time
import warnings
from pathlib import Path

import nbformat
from nbformat.warnings import MissingIDFieldWarning
from nbgrader.api import Gradebook, MissingEntry

from autograder import lessons
from autograder.engine import cpp_cache, durations, intake, intake_time, parallel, verdicts
from autograder.engine import workspace as layout
from autograder.engine.kernels.sandbox import Limits
from autograder.engine.kernels.sandbox import problem as sandbox_problem
from autograder.engine.nbgrader_config import CELL_TIMEOUT_S
from autograder.engine.nbgrader_steps import CourseAPI
from autograder.engine.plain_text import one_line
from autograder.engine.submission import Graded, Problem, Setup
from autograder.engine.workspace import Key

warnings.filterwarnings("ignore", category=MissingIDFieldWarning)  # older notebooks: no effect on grades


# What the pipeline writes into its workspace, so that nbgrader's own tools started there (the
# Formgrader of `make formgrader`, `nbgrader` commands) grade and validate as the pipeline does.
CONFIG_FILE = """\
# Written by the course's pipeline (autograder/engine/pipeline.py) each time it opens this workspace, so
# that nbgrader's own tools started here (the Formgrader, `nbgrader` commands) grade exactly as
# `python -m autograder` does. Change the pipeline's options, not this file.
import os
from pathlib import PosixPath

from autograder.engine.kernels.sandbox import Limits
from autograder.engine.nbgrader_patches import apply_course_patches
from autograder.engine.submission import Setup

os.environ.setdefault("COURSE_DEVICE", "cpu")  # kernels and judge on the CPU, as the pipeline grades
setup = {setup}
c = get_config()  # noqa: F821 (Jupyter's configuration loader provides it)
c.merge(setup.config())
apply_course_patches(setup)  # the Autograde button and Validate grade as the pipeline does
"""


def _write_config_file(path: Path, text: str) -> None:
    """``text`` into ``path``, readable by its owner only (it may hold the gradebook's password),
    whole at every moment: worker processes that open the same workspace write it at once."""
    if path.is_file() and path.read_text() == text:
        return
    partial = path.with_name(f".{path.name}.{os.getpid()}")
    partial.write_text(text)
    partial.chmod(0o600)
    partial.replace(path)


class SandboxUnavailable(RuntimeError):
    """Grading was asked for with the sandbox on, and it cannot run here."""


class Pipeline:
    """One grading workspace and the steps that fill it.

    ``release`` is where ``release`` writes the learners' notebooks: by default ``release/`` in the
    workspace, never the checkout's ``course/``, where a learner's own work may lie.
    ``sandbox`` holds the limits of the sandbox every grading kernel runs in
    (autograder/engine/kernels/sandbox.py); None grades without it, with the instructor's own permissions.
    ``db_url`` is the gradebook (a SQLAlchemy URL, e.g. ``postgresql+psycopg://host/db``);
    None keeps it in the workspace, in SQLite. ``warm`` forks each sandboxed kernel from a
    zygote that imported torch and the checks once (autograder/engine/kernels/zygote.py); False starts each
    kernel cold, as nbgrader does.
    """

    def __init__(
        self,
        workspace: Path,
        release: Path | None = None,
        log=print,
        cell_timeout_s: int = CELL_TIMEOUT_S,
        sandbox: Limits | None = Limits(),  # noqa: B008 (frozen: one shared default is safe)
        run_everything: bool = False,
        db_url: str | None = None,
        warm: bool = True,
    ):
        if sandbox is not None and (reason := sandbox_problem()) is not None:
            raise SandboxUnavailable(
                f"cannot grade in the sandbox: {reason}. Submissions run code with your permissions; "
                "to grade without the sandbox anyway, pass --unsafe."
            )
        # Grading computes on the CPU, in the kernels and in the judge alike: a sandboxed kernel
        # sees no GPU, and the judge must hand the learner's code tensors on its device.
        os.environ.setdefault("COURSE_DEVICE", "cpu")
        self.workspace = workspace.resolve()
        self.workspace.mkdir(parents=True, exist_ok=True)
        (self.workspace / layout.EXCHANGE).mkdir(exist_ok=True)  # the Formgrader's (nbgrader_config.py)
        self.setup = Setup(
            self.workspace,
            Path(release or layout.release(self.workspace)).resolve(),
            cell_timeout_s,
            sandbox,
            run_everything,
            layout.gradebook_url(self.workspace, db_url),
            warm,
        )
        self.api = CourseAPI(config=self.setup.config())  # its feedback follows no link
        _write_config_file(self.workspace / "nbgrader_config.py", CONFIG_FILE.format(setup=repr(self.setup)))
        # nbgrader logs to the shared "traitlets" logger: nothing of it reaches the terminal (each
        # failure gets one line in the problems), but its errors still reach the captured log
        # of a failed run, which says why it failed
        self.api.log.setLevel(logging.ERROR)
        self.api.log.propagate = False
        self.problems: list[Problem] = []
        self.log = log

    def gradebook(self) -> Gradebook:
        """A connection to this course's gradebook (use it in a ``with`` block)."""
        return Gradebook(self.setup.db_url, course_id=self.api.coursedir.course_id)

    @property
    def submitted(self) -> Path:
        return layout.submitted(self.workspace)

    def _check(self, result: dict, step: str) -> bool:
        if not result["success"]:
            self.log(f"  {step} failed: {one_line((result.get('error') or result.get('log') or '')[-800:])}")
        return bool(result["success"])

    def release(self, names: list[str]) -> None:
        """Generate learners' notebooks into the release folder and record the lessons in the gradebook."""
        for lesson in names:
            self.log(f"release {lesson}")
            if not self._check(self.api.generate_assignment(lesson, force=True, create=True), "release"):
                raise RuntimeError(f"could not release {lesson}")
            if lesson in cpp_cache.CPP_LESSONS:
                began = time.perf_counter()
                _, binding = cpp_cache.prepare(cpp_cache.shared_cache(self.workspace))
                made = "made" if binding is not None else "not made (each kernel builds its own)"
                self.log(
                    f"  the grader's C++ header and binding object {made} in "
                    f"{time.perf_counter() - began:.1f} s (once per machine, then linked into each workspace)"
                )

    def _intake(self) -> intake.Intake:
        """The intake of this workspace, adding to this pipeline's problems."""
        return intake.Intake(self.workspace, layout.course_zone(self.workspace), self.problems)

    def collect_folder(self, folder: Path) -> None:
        """Take in ``folder/<student>/<lesson>/*.ipynb`` (autograder/engine/intake.py)."""
        self._intake().collect_folder(folder)

    def collect_zip(self, archive: Path, lesson: str, only: str | None = None) -> set[str]:
        """Take in an LMS download for one lesson; with ``only``, just that student's attempt.
        Returns the students the download holds a notebook of."""
        return self._intake().collect_zip(archive, lesson, only)

    def take(
        self, student: str, lesson: str, notebook: Path, handed: intake_time.Handed | None = None
    ) -> None:
        """Take in one notebook of ``student`` for ``lesson``, or say in the problems why not."""
        self._intake().take(student, lesson, notebook, handed)

    def save_problems(self) -> Path:
        """problems.csv in the workspace: what could not be graded as handed in, and why."""
        return layout.save_problems(self.workspace, [(p.student, p.lesson, p.what) for p in self.problems])

    def submissions(self) -> list[Key]:
        """(student, lesson) of every submission taken in, in course order (lesson, then student)."""
        keys = [Key(p.parent.name, p.name) for p in self.submitted.glob("*/*") if p.is_dir()]
        return sorted(keys, key=lambda key: (lessons.LESSON_NAMES.index(key.lesson), key.student))

    def _deleted_test_cells(self, key: Key) -> list[str]:
        source = nbformat.read(lessons.source_path(key.lesson), as_version=4)
        wanted = [
            c.metadata.nbgrader["grade_id"] for c in source.cells if c.metadata["nbgrader"].get("grade")
        ]
        folder = layout.submission(self.workspace, key)
        present = {
            c.metadata.get("nbgrader", {}).get("grade_id")
            for path in folder.glob("*.ipynb")
            for c in nbformat.read(path, as_version=4).cells
        }
        return [grade_id for grade_id in wanted if grade_id not in present]

    def released(self) -> set[str]:
        """The lessons recorded in this workspace's gradebook by `release`."""
        with self.gradebook() as gb:
            return {assignment.name for assignment in gb.assignments}

    def autograde(
        self, jobs: int = 1, scheduler: str | None = None, pairs: list[Key] | None = None
    ) -> list[Graded]:
        """Grade every submission taken in (or only the (student, lesson) ``pairs``); one that
        fails costs only itself.

        ``jobs`` worker processes grade at once on this machine (autograder/engine/parallel.py); with
        ``scheduler`` (a Dask scheduler's address), the workers of that cluster grade instead.
        """
        pairs = self._gradable(self.submissions() if pairs is None else pairs)
        with self.gradebook() as gb:  # made here, once, not by workers racing to create them
            for student in sorted({key.student for key in pairs}):
                gb.update_or_create_student(student)
        if scheduler:
            graded = parallel.on_dask(self.setup, pairs, scheduler)
        elif jobs > 1:
            graded = parallel.on_processes(self.setup, pairs, jobs)
        else:
            graded = (verdicts.grade(self.setup, key.lesson, key.student) for key in pairs)
        start = time.perf_counter()
        done = []
        for index, outcome in enumerate(graded, 1):
            done.append(outcome)  # its verdict recorded where it was graded (verdicts.grade)
            self.problems += outcome.problems
            left = (time.perf_counter() - start) / index * (len(pairs) - index)
            seconds = f"{outcome.seconds:.1f} s (judge {outcome.judge_seconds:.1f} s)"
            where = f"{outcome.lesson} / {outcome.student}"
            self.log(
                f"[{index}/{len(pairs)}] autograde {where}: {seconds}; about {durations.in_words(left)} to go"
            )
        return done

    def _gradable(self, pairs: list[Key]) -> list[Key]:
        """The (student, lesson) pairs that can be graded here; a problem for each that cannot,
        and for what grading will restore or flag."""
        released = self.released()
        gradable = []
        for key in (Key(*pair) for pair in pairs):
            if key.lesson not in released:
                run = f"python -m autograder release {key.lesson}"
                self.problems.append(Problem(*key, f"not released in this workspace: run `{run}` first"))
                continue
            deleted = self._deleted_test_cells(key)
            if deleted:
                restored = ", ".join(deleted)
                self.problems.append(Problem(*key, f"deleted test cells restored and graded: {restored}"))
            gradable.append(key)
        return gradable

    def grade(self, lesson: str, student: str) -> Graded:
        """Autograde one submission (autograder/engine/submission.py), record its verdict and return it."""
        return verdicts.grade(self.setup, lesson, student)

    def feedback(self, only: set[Key] | None = None) -> list[Path]:
        """nbgrader's HTML feedback for every submission taken in (or only the (student, lesson)
        pairs ``only``); returns the files of the feedback folder. The late-work notices are
        added above the engine (autograder/instructor/grades.py)."""
        for key in self.submissions():
            if only is None or key in only:
                self._check(self.api.generate_feedback(key.lesson, key.student, force=True), "feedback")
        return sorted(layout.feedback(self.workspace).glob("*/*/*.html"))

    def scores(self) -> dict[Key, tuple[float, float]]:
        """(student, lesson) -> (score, max_score) for every graded submission."""
        found = {}
        with self.gradebook() as gb:
            for key in self.submissions():
                try:
                    submission = gb.find_submission(key.lesson, key.student)
                except MissingEntry:
                    continue
                found[key] = (submission.score, submission.max_score)
        return found

    def failures(self) -> dict[Key, str]:
        """(student, lesson) -> why its last grading did not finish, as its verdict recorded it:
        whatever the gradebook holds for it is no score."""
        found = {}
        for key in self.submissions():
            file = verdicts.path(self.workspace, key.lesson, key.student)
            if file.is_file() and (failure := verdicts.read(file).failure) is not None:
                found[key] = failure
        return found
