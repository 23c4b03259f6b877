"""Grades after late work: the one place scores meet the course's late-work policy.

Every figure that leaves the workspace is read from ``Grades``: grades.csv (``export``), the
terminal table (``table``), Canvas's and Moodle's imports (autograder/instructor/lms.py, which
``export_lms`` hands them to) and the late-work notice on each learner's feedback pages
(``feedback``). ``assess`` builds it from the gradebook's scores and the gradings that did not
finish (no score, whatever the gradebook holds), the hand-in times the intake recorded and the
policy of course.toml (autograder/instructor/late.py); ``of`` does so for a pipeline's workspace.

The engine (autograder/engine/) grades and writes nbgrader's pages; it knows nothing of due
dates. The commands (autograder/__main__.py) call this module after the engine's steps.
"""

from dataclasses import dataclass, replace
from pathlib import Path

from autograder import lessons
from autograder.engine import csv_files, feedback_page, intake_time
from autograder.engine import workspace as layout
from autograder.engine.intake_time import Handed
from autograder.engine.pipeline import Pipeline
from autograder.engine.submission import Problem
from autograder.engine.workspace import Key
from autograder.instructor import late, lms

Scores = dict[Key, tuple[float, float]]
GRADES_COLUMNS = ["student", "lesson", "score", "max_score", "handed_in", "days_late", "after_late", "status"]


@dataclass(frozen=True)
class Grade:
    """One finished grading: the points it earned, the most it could earn, and what lateness did
    to them (``late.score``, also ``score``: the points kept)."""

    earned: float
    max_score: float
    late: late.Late

    @property
    def score(self) -> float:
        """The points kept after the late penalty: the figure every export and the table give."""
        return self.late.score


def apply_late(scores: Scores, handed: dict[Key, Handed | None], policy: late.Policy) -> dict[Key, Grade]:
    """Every (student, lesson) score with ``policy``'s late penalty applied."""
    return {
        key: Grade(float(score), float(most), late.assess(policy, *key, handed.get(key), score))
        for key, (score, most) in scores.items()
    }


@dataclass(frozen=True)
class Grades:
    """A workspace's grades: each finished grading after late work (``graded``), the gradings that
    did not finish and why (``failed``), when each was handed in, the policy, and the problems
    found on the way (hand-in records that cannot be read, lateness known from a file's time alone)."""

    graded: dict[Key, Grade]
    failed: dict[Key, str]
    handed: dict[Key, Handed | None]
    policy: late.Policy
    problems: list[Problem]

    def only(self, lesson: str) -> "Grades":
        """These grades of ``lesson`` alone; a ValueError for an unknown lesson or one with none graded."""
        if lesson not in lessons.LESSON_NAMES:
            raise ValueError(
                f"--lesson {lesson!r} is no lesson; expected one of {', '.join(lessons.LESSON_NAMES)}"
            )
        if not any(key.lesson == lesson for key in [*self.graded, *self.failed]):
            done = sorted({key.lesson for key in self.graded}, key=lessons.LESSON_NAMES.index)
            raise ValueError(
                f"no graded submission of {lesson} in this workspace; expected one of the lessons graded: "
                f"{', '.join(done) or 'none yet'}"
            )
        return replace(
            self,
            graded={key: grade for key, grade in self.graded.items() if key.lesson == lesson},
            failed={key: why for key, why in self.failed.items() if key.lesson == lesson},
            problems=[problem for problem in self.problems if problem.lesson == lesson],
        )


def assess(root: Path, scores: Scores, failed: dict[Key, str] | None = None) -> Grades:
    """The grades of the workspace ``root``: ``scores`` ((student, lesson) -> (score, max), as
    Pipeline.scores gives them) but those in ``failed``, after the late work of its course.toml."""
    failed = {Key(*key): why for key, why in (failed or {}).items()}
    finished = {Key(*key): value for key, value in scores.items() if key not in failed}
    policy = late.load(root)
    handed, problems = late.handed_times(root, sorted({*finished, *failed}), policy.zone)
    graded = apply_late(finished, handed, policy)
    for key, grade in sorted(graded.items()):
        when = handed[key]
        if grade.late.days and when is not None and when.source in intake_time.UNPROVEN:
            witness = intake_time.SOURCE_WORDS[when.source]
            problems.append(
                Problem(*key, f"late by {witness} only, not deducted: check when it was handed in")
            )
    return Grades(graded, failed, handed, policy, problems)


def of(pipeline: Pipeline) -> Grades:
    """The grades of ``pipeline``'s workspace, from its gradebook and its verdicts."""
    return assess(pipeline.workspace, pipeline.scores(), pipeline.failures())


def _report(pipeline: Pipeline, problems: list[Problem]) -> None:
    """Add ``problems`` to the pipeline's, each once however many steps found it."""
    pipeline.problems += [problem for problem in dict.fromkeys(problems) if problem not in pipeline.problems]


def feedback(pipeline: Pipeline, only: set[Key] | None = None) -> list[Path]:
    """The learners' feedback pages (every graded submission's, or only those of ``only``), each
    with its late-work statement; returns the files of the feedback folder."""
    pages = pipeline.feedback(only)
    grades = of(pipeline)
    _report(pipeline, grades.problems)
    for key, grade in grades.graded.items():
        if (only is None or key in only) and grade.late.statement:
            for page in layout.feedback(pipeline.workspace, key).glob("*.html"):
                feedback_page.add_notice(page, grade.late.statement)
    return pages


def export(pipeline: Pipeline, path: Path) -> Path:
    """grades.csv: one row per student and lesson (its score, when it was handed in and by
    which witness, days late, the score after the late penalty of course.toml, and its
    status), then one total row per student. A grading that did not finish has empty score
    cells and says why in its status; its student's total says it is incomplete."""
    grades = of(pipeline)
    _report(pipeline, grades.problems)
    rows: list[list[csv_files.Cell]] = [GRADES_COLUMNS]
    for key in sorted({*grades.graded, *grades.failed}):
        when = grades.handed[key]
        zone = grades.policy.zone
        shown = f"{when.at.astimezone(zone).isoformat(timespec='seconds')} ({when.source})" if when else ""
        if key in grades.failed:
            rows.append([*key, None, None, shown, None, None, f"not graded: {grades.failed[key]}"])
            continue
        grade = grades.graded[key]
        rows.append([*key, grade.earned, grade.max_score, shown, grade.late.days, grade.score, "graded"])
    for student in sorted({key.student for key in [*grades.graded, *grades.failed]}):
        mine = [grade for key, grade in grades.graded.items() if key.student == student]
        missing = sum(1 for key in grades.failed if key.student == student)
        status = f"incomplete: {missing} not graded" if missing else "graded"
        total, most = sum(grade.earned for grade in mine), sum(grade.max_score for grade in mine)
        rows.append([student, "TOTAL", total, most, "", "", sum(grade.score for grade in mine), status])
    return csv_files.write(path, rows)


def lms_file(
    grades: Grades, root: Path, kind: str, roster: Path, out: Path, lesson: str | None = None
) -> list[Problem]:
    """The grades of ``grades`` written to ``out`` for ``kind`` ("canvas", "moodle-email" or
    "moodle-id_number"), for the people of ``roster``; returns the problems to report: the
    gradings left out because they did not finish, hand-in times that could not be read,
    lateness by a file's time alone, and the roster report. A grading that did not finish is no
    score: its cell is left empty, so that the LMS keeps what it holds.

    With ``lesson``, only that lesson leaves: its column, and a row only for a learner it has a
    grade for, so that an import changes no grade entered by hand in the LMS (Moodle's importer
    takes an empty cell of a mapped column as "no grade")."""
    if kind not in lms.KINDS:
        raise ValueError(f"lms is {kind!r}; expected canvas, moodle-email or moodle-id_number")
    if lesson is not None:
        grades = grades.only(lesson)
    people = lms.read_roster(roster)
    left_out = [
        Problem(*key, f"grading did not finish, left out of the export (grade it again): {why}")
        for key, why in sorted(grades.failed.items())
    ]
    return left_out + grades.problems + lms.write(kind, out, people, grades.graded, lms.canvas_ids(root))


def export_lms(pipeline: Pipeline, kind: str, roster: Path, path: Path, lesson: str | None = None) -> Path:
    """Canvas's or Moodle's grade import (``lms_file``) of the pipeline's grades, and the
    gradebook's students named as the roster names them; the problems go into the pipeline's."""
    _report(pipeline, lms_file(of(pipeline), pipeline.workspace, kind, roster, path, lesson))
    lms.name_students(pipeline, roster)
    return path


def table(pipeline: Pipeline) -> str:
    """Students x lessons, 'score/max' in each cell after the late penalty (as grades.csv's
    after_late and the LMS exports), '-' where nothing was graded, 'failed' where grading
    did not finish."""
    grades = of(pipeline)
    keys = [*grades.graded, *grades.failed]
    students = sorted({key.student for key in keys} | {problem.student for problem in pipeline.problems})
    names = [lesson for lesson in lessons.LESSON_NAMES if lesson in {key.lesson for key in keys}]
    header = ["student", *[lesson.split("_", 1)[0] for lesson in names], "total"]
    rows = [header]
    for student in students:
        cells = [grades.graded.get(Key(student, lesson)) for lesson in names]
        total = sum(c.score for c in cells if c), sum(c.max_score for c in cells if c)
        shown = [
            f"{c.score:g}/{c.max_score:g}" if c else "failed" if (student, lesson) in grades.failed else "-"
            for c, lesson in zip(cells, names, strict=True)
        ]
        rows.append([student, *shown, f"{total[0]:g}/{total[1]:g}"])
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    lines = [
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip() for row in rows
    ]
    legend = "scores after late penalties; lessons: " + ", ".join(names)
    return "\n".join([*lines, legend])
