"""The instructor's pipeline on top of nbgrader: release, collect, autograde, feedback, export.

Each step is a method of ``Pipeline``, which holds one grading workspace (gradebook,
submitted/, autograded/, feedback/), outside the repository's tracked tree. Nothing
here re-implements grading: the steps call nbgrader's API with the course's
configuration (autograder/engine/nbgrader_config.py) and add what 200 real submissions need:
a corrupt notebook is reported and skipped without touching the student's other
lessons, a failed grading run is reported with its reason, and progress is printed.
"""

import csv
import logging
import os
import time
import warnings
from pathlib import Path

import nbformat
from nbformat.warnings import MissingIDFieldWarning
from nbgrader.api import Gradebook, MissingEntry

from autograder import lessons
from autograder.engine import csv_files, feedback_page, intake, intake_time, parallel, verdicts
from autograder.engine.kernels.sandbox import Limits
from autograder.engine.kernels.sandbox import problem as sandbox_problem
from autograder.engine.nbgrader_config import CELL_TIMEOUT_S
from autograder.engine.nbgrader_steps import CourseAPI
from autograder.engine.plain_text import one_line, report_line
from autograder.engine.submission import Graded, Problem, Setup
from autograder.instructor import late, lms

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


def sqlite_url(workspace: Path) -> str:
    """The workspace's own gradebook. Parallel graders wait up to a minute for each other's
    short writes, instead of failing at once on a locked database (SQLite's default is 5 s)."""
    return f"sqlite:///{workspace / 'gradebook.db'}?timeout=60"


def _duration(seconds: float) -> str:
    """'42 s', '3 min 5 s', '2 h 10 min': an ETA a person reads at a glance."""
    seconds = round(seconds)
    if seconds < 60:
        return f"{seconds} s"
    if seconds < 3600:
        return f"{seconds // 60} min {seconds % 60} s"
    return f"{seconds // 3600} h {seconds % 3600 // 60} min"


# Characters a roster name (which learners set themselves in the LMS) never needs, and which
# nbgrader's Formgrader would read as markup: its submission page writes the gradebook's names
# into HTML unescaped (formgrade_macros.html.j2).
MARKUP = str.maketrans("", "", "<>&")  # the page writes names as text, never into an attribute


def _first_last(name: str) -> tuple[str, str]:
    """A roster's display name as (first, last), on one line and without < > &:
    "Çetin, Ada" and "Ada Çetin" are ("Ada", "Çetin")."""
    name = report_line(name).translate(MARKUP)
    if "," in name:
        last, first = name.split(",", 1)
        return first.strip(), last.strip()
    first, _, last = name.strip().rpartition(" ")
    return (first, last) if first else (last, "")


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
        (self.workspace / "exchange").mkdir(exist_ok=True)  # the Formgrader's (nbgrader_config.py)
        self.setup = Setup(
            self.workspace,
            Path(release or self.workspace / "release").resolve(),
            cell_timeout_s,
            sandbox,
            run_everything,
            db_url or sqlite_url(self.workspace),
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
        return self.workspace / "submitted"

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

    def _intake(self) -> intake.Intake:
        """The intake of this workspace, adding to this pipeline's problems."""
        return intake.Intake(self.workspace, late.load(self.workspace).zone, self.problems)

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
        path = self.workspace / "problems.csv"
        known: set[tuple[str, ...]] = set()  # earlier runs' rows, as csv_files writes them
        if path.exists():
            with path.open(newline="", encoding="utf-8") as handle:
                known = {tuple(map(csv_files.cell, row)) for row in list(csv.reader(handle))[1:]}
        found = {tuple(map(csv_files.cell, (p.student, p.lesson, p.what))) for p in self.problems}
        return csv_files.write(path, [("student", "lesson", "problem"), *sorted(known | found)])

    def submissions(self) -> list[tuple[str, str]]:
        """(lesson, student) pairs taken in, in course order."""
        pairs = [(p.name, p.parent.name) for p in self.submitted.glob("*/*") if p.is_dir()]
        return sorted(pairs, key=lambda pair: (lessons.LESSON_NAMES.index(pair[0]), pair[1]))

    def _deleted_test_cells(self, lesson: str, student: str) -> list[str]:
        source = nbformat.read(lessons.source_path(lesson), as_version=4)
        wanted = [
            c.metadata.nbgrader["grade_id"] for c in source.cells if c.metadata["nbgrader"].get("grade")
        ]
        folder = self.submitted / student / lesson
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
        self, jobs: int = 1, scheduler: str | None = None, pairs: list[tuple[str, str]] | None = None
    ) -> list[Graded]:
        """Grade every submission taken in (or only the (lesson, student) ``pairs``); one that
        fails costs only itself.

        ``jobs`` worker processes grade at once on this machine (autograder/engine/parallel.py); with
        ``scheduler`` (a Dask scheduler's address), the workers of that cluster grade instead.
        """
        pairs = self._gradable(self.submissions() if pairs is None else pairs)
        with self.gradebook() as gb:  # made here, once, not by workers racing to create them
            for student in sorted({student for _, student in pairs}):
                gb.update_or_create_student(student)
        if scheduler:
            graded = parallel.on_dask(self.setup, pairs, scheduler)
        elif jobs > 1:
            graded = parallel.on_processes(self.setup, pairs, jobs)
        else:
            graded = (verdicts.grade(self.setup, lesson, student) for lesson, student in pairs)
        start = time.perf_counter()
        done = []
        for index, outcome in enumerate(graded, 1):
            done.append(outcome)  # its verdict recorded where it was graded (verdicts.grade)
            self.problems += outcome.problems
            left = (time.perf_counter() - start) / index * (len(pairs) - index)
            seconds = f"{outcome.seconds:.1f} s (judge {outcome.judge_seconds:.1f} s)"
            where = f"{outcome.lesson} / {outcome.student}"
            self.log(f"[{index}/{len(pairs)}] autograde {where}: {seconds}; about {_duration(left)} to go")
        return done

    def _gradable(self, pairs: list[tuple[str, str]]) -> list[tuple[str, str]]:
        """The (lesson, student) pairs that can be graded here; a problem for each that cannot,
        and for what grading will restore or flag."""
        released = self.released()
        gradable = []
        for lesson, student in pairs:
            if lesson not in released:
                hint = f"not released in this workspace: run `python -m autograder release {lesson}` first"
                self.problems.append(Problem(student, lesson, hint))
                continue
            deleted = self._deleted_test_cells(lesson, student)
            if deleted:
                restored = ", ".join(deleted)
                self.problems.append(
                    Problem(student, lesson, f"deleted test cells restored and graded: {restored}")
                )
            gradable.append((lesson, student))
        return gradable

    def grade(self, lesson: str, student: str) -> Graded:
        """Autograde one submission (autograder/engine/submission.py), record its verdict and return it."""
        return verdicts.grade(self.setup, lesson, student)

    def feedback(self, only: set[tuple[str, str]] | None = None) -> list[Path]:
        """HTML feedback for every graded submission (or only the (lesson, student) pairs
        ``only``), with its late-work statement (autograder/instructor/late.py); returns the
        files of the feedback folder."""
        policy = late.load(self.workspace)
        scores = self.scores()
        handed, problems = late.handed_times(self.submitted, list(scores), policy.zone)
        self.problems += problems
        for lesson, student in self.submissions():
            if only is not None and (lesson, student) not in only:
                continue
            self._check(self.api.generate_feedback(lesson, student, force=True), "feedback")
            if (student, lesson) not in scores:
                continue
            said = late.statement(
                policy, student, lesson, handed[student, lesson], scores[student, lesson][0]
            )
            if said:
                for page in (self.workspace / "feedback" / student / lesson).glob("*.html"):
                    feedback_page.add_notice(page, said)
        return sorted((self.workspace / "feedback").glob("*/*/*.html"))

    def scores(self) -> dict[tuple[str, str], tuple[float, float]]:
        """(student, lesson) -> (score, max_score) for every graded submission."""
        found = {}
        with self.gradebook() as gb:
            for lesson, student in self.submissions():
                try:
                    submission = gb.find_submission(lesson, student)
                except MissingEntry:
                    continue
                found[(student, lesson)] = (submission.score, submission.max_score)
        return found

    def failures(self) -> dict[tuple[str, str], str]:
        """(student, lesson) -> why its last grading did not finish, as its verdict recorded it:
        whatever the gradebook holds for it is no score."""
        found = {}
        for lesson, student in self.submissions():
            file = verdicts.path(self.workspace, lesson, student)
            if file.is_file() and (failure := verdicts.read(file).failure) is not None:
                found[student, lesson] = failure
        return found

    def export(self, path: Path) -> Path:
        """grades.csv: one row per student and lesson (its score, when it was handed in and by
        which witness, days late, the score after the late penalty of course.toml, and its
        status), then one total row per student. A grading that did not finish has empty score
        cells and says why in its status; its student's total says it is incomplete."""
        failed = self.failures()
        scores = {key: value for key, value in self.scores().items() if key not in failed}
        policy = late.load(self.workspace)
        handed, problems = late.handed_times(self.submitted, sorted({*scores, *failed}), policy.zone)
        self.problems += [problem for problem in problems if problem not in self.problems]
        rows: list[list[csv_files.Cell]] = [
            ["student", "lesson", "score", "max_score", "handed_in", "days_late", "after_late", "status"]
        ]
        kept: dict[str, float] = {}
        for student, lesson in sorted({*scores, *failed}):
            when = handed[student, lesson]
            shown = (
                f"{when.at.astimezone(policy.zone).isoformat(timespec='seconds')} ({when.source})"
                if when
                else ""
            )
            kept.setdefault(student, 0.0)
            if (student, lesson) in failed:
                status = f"not graded: {failed[student, lesson]}"
                rows.append([student, lesson, None, None, shown, None, None, status])
                continue
            score, most = scores[student, lesson]
            lateness = late.assess(policy, student, lesson, when, score)
            kept[student] += lateness.score
            row = [student, lesson, float(score), float(most), shown, lateness.days, lateness.score, "graded"]
            rows.append(row)
        for student in sorted(kept):
            mine = [value for (who, _), value in scores.items() if who == student]
            total, most = sum(s for s, _ in mine), sum(m for _, m in mine)
            missing = sum(1 for who, _ in failed if who == student)
            status = f"incomplete: {missing} not graded" if missing else "graded"
            rows.append([student, "TOTAL", total, most, "", "", kept[student], status])
        return csv_files.write(path, rows)

    def export_lms(self, kind: str, roster: Path, path: Path, lesson: str | None = None) -> Path:
        """Canvas's or Moodle's grade import (autograder/instructor/lms.py), late penalties applied,
        without the gradings that did not finish (with ``lesson``, that lesson's graded rows only);
        the roster report, the gradings left out and unreadable hand-in times go into the problems."""
        found = lms.export(self.workspace, self.scores(), roster, path, kind, self.failures(), lesson)
        self.name_students(roster)
        self.problems += [problem for problem in found if problem not in self.problems]  # once per run
        return path

    def name_students(self, roster: Path) -> None:
        """Give the gradebook's students the roster's names, so that the Formgrader shows them:
        "Last, First" is split at its comma, "First Last" at its last space."""
        with self.gradebook() as gb:
            known = {student.id for student in gb.students}
            for person in lms.read_roster(roster).people:
                if person.student in known and person.name:
                    first, last = _first_last(person.name)
                    gb.update_or_create_student(person.student, first_name=first, last_name=last)

    def after_late(self) -> dict[tuple[str, str], tuple[float, float]]:
        """(student, lesson) -> (score after the late penalty, max_score) for every graded
        submission whose grading finished: the figures grades.csv and the LMS exports give."""
        failed = self.failures()
        scores = {key: value for key, value in self.scores().items() if key not in failed}
        policy = late.load(self.workspace)
        handed, _ = late.handed_times(self.submitted, list(scores), policy.zone)
        return {
            key: (late.assess(policy, *key, handed[key], score).score, most)
            for key, (score, most) in scores.items()
        }

    def table(self) -> str:
        """Students x lessons, 'score/max' in each cell after the late penalty (as grades.csv's
        after_late and the LMS exports), '-' where nothing was graded, 'failed' where grading
        did not finish."""
        scores = self.after_late()
        failed = self.failures()
        students = sorted({student for student, _ in [*scores, *failed]} | {p.student for p in self.problems})
        graded = {lesson for _, lesson in [*scores, *failed]}
        names = [lesson for lesson in lessons.LESSON_NAMES if lesson in graded]
        header = ["student", *[lesson.split("_", 1)[0] for lesson in names], "total"]
        rows = [header]
        for student in students:
            cells = [scores.get((student, lesson)) for lesson in names]
            total = sum(c[0] for c in cells if c), sum(c[1] for c in cells if c)
            shown = [
                f"{c[0]:g}/{c[1]:g}" if c else "failed" if (student, lesson) in failed else "-"
                for c, lesson in zip(cells, names, strict=True)
            ]
            rows.append([student, *shown, f"{total[0]:g}/{total[1]:g}"])
        widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
        lines = [
            "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
            for row in rows
        ]
        legend = "scores after late penalties; lessons: " + ", ".join(names)
        return "\n".join([*lines, legend])
