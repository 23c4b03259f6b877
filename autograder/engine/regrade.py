"""Regrade one student, or one student's lesson, and nobody else; record what changed.

An instructor regrades after a student resubmits, after an appeal, or after a check was
fixed. ``regrade`` takes the student's notebooks in again from the source given (a folder laid
out ``<student>/<lesson>/*.ipynb``, or an LMS zip), or keeps what is in ``submitted/`` when no
source is given; grades only those submissions (nbgrader's autograde for one student and
lesson touches no other's row in the gradebook); and appends one line per lesson to
``<workspace>/regrades.csv``: when, the score before and after, the test cells whose points
changed, and where the notebooks came from. What is replaced is never lost: the former
submission is moved to ``<workspace>/replaced/<student>/<lesson>/<time>/``.

The hand-in time recorded at the first intake stays, unless the new source carries the LMS's
own time (``intake_time.LMS_SOURCES``): a folder's file times are those of the copy, not of the
hand-in, and would move a late penalty. A changed hand-in time is said in the problems. The
student's feedback pages of the lessons regraded are written again, where there were pages, by
the caller's ``feedback`` (the command line's writes them with their late-work notices,
autograder/instructor/grades.py); nobody else's are touched.
"""

import contextlib
import shutil
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from autograder.engine import csv_files, intake_time, verdicts
from autograder.engine import workspace as layout
from autograder.engine.pipeline import Pipeline
from autograder.engine.submission import Graded, Problem
from autograder.engine.workspace import Key

LOG = "regrades.csv"
COLUMNS = ["regraded_at", "student", "lesson", "before", "after", "cells_changed", "source"]


@dataclass(frozen=True)
class Change:
    """One lesson regraded: its score before (None when it had none) and after, and each test
    cell whose points changed (grade id -> (before, after))."""

    student: str
    lesson: str
    before: float | None
    after: float
    max_score: float
    cells: dict[str, tuple[float | None, float]]
    source: str


def _points_before(workspace: Path, lesson: str, student: str) -> tuple[float | None, dict[str, float]]:
    """The submission's score and points per test cell as last graded (None, {} if never)."""
    file = verdicts.path(workspace, lesson, student)
    if not file.is_file():
        return None, {}
    before = verdicts.read(file)
    return before.score, {grade_id: cell.points for grade_id, cell in before.cells.items()}


@contextlib.contextmanager
def _replacing(pipeline: Pipeline, student: str, lesson: str) -> Iterator[None]:
    """Move the student's current submission of ``lesson`` to replaced/ while the block takes the
    new one in; if nothing new was accepted (a corrupt notebook, say: the problems say why), the
    former submission is put back."""
    current = layout.submission(pipeline.workspace, Key(student, lesson))
    moment = datetime.now(UTC).strftime("%Y%m%dT%H%M%S%fZ")
    kept = pipeline.workspace / layout.REPLACED / student / lesson / moment
    if current.is_dir():
        kept.parent.mkdir(parents=True, exist_ok=True)
        shutil.move(current, kept)
    try:
        yield
    finally:
        if kept.is_dir() and not current.is_dir():
            shutil.move(kept, current)


def _retake(
    pipeline: Pipeline, student: str, lesson: str | None, folder: Path | None, archive: Path | None
) -> list[str]:
    """Take the student's notebooks in again from ``folder`` or ``archive``; the lessons they hold."""
    if archive is not None:
        if lesson is None:
            raise ValueError("a zip holds one lesson: regrade from --zip needs --lesson")
        if not archive.is_file():
            raise FileNotFoundError(f"{archive}: no such file; expected the LMS's download of {lesson}")
        if not zipfile.is_zipfile(archive):
            raise ValueError(f"{archive}: not a zip file; expected the LMS's download of {lesson}")
        with _replacing(pipeline, student, lesson):
            try:
                found = pipeline.collect_zip(archive, lesson, only=student)
            except zipfile.BadZipFile as error:
                raise ValueError(f"{archive}: a broken zip file ({error}); nothing was taken in") from None
        if student not in found:
            raise ValueError(f"no notebook of {student!r} in {archive}, by the LMS's names of attempts")
        return [lesson]
    wanted = [p for p in sorted((folder / student).glob("*/*.ipynb")) if lesson in (None, p.parent.name)]
    if not wanted:
        raise ValueError(f"no notebooks of {student!r} in {folder / student}/{lesson or '<lesson>'}/")
    lessons = sorted({p.parent.name for p in wanted})
    for name in lessons:
        with _replacing(pipeline, student, name):
            for notebook in wanted:
                if notebook.parent.name == name:
                    pipeline.take(student, name, notebook)
    return lessons


def regrade(
    pipeline: Pipeline,
    student: str,
    lesson: str | None = None,
    folder: Path | None = None,
    archive: Path | None = None,
    *,
    feedback: Callable[[Pipeline, set[Key]], object],
) -> list[Change]:
    """Regrade ``student`` (only ``lesson``, when given), taking the notebooks in again from
    ``folder`` or ``archive`` when one is given; returns and records what changed. The lessons
    regraded that had feedback pages get them again from ``feedback(pipeline, keys)``."""
    if folder is not None or archive is not None:
        named = [lesson] if lesson else sorted(p.name for p in (pipeline.submitted / student).glob("*"))
        recorded = {
            name: _recorded(layout.submission(pipeline.workspace, Key(student, name))) for name in named
        }
        lessons = _retake(pipeline, student, lesson, folder, archive)
        for name in lessons:
            _keep_handed(pipeline, student, name, recorded.get(name))
        source = str(folder or archive)
    else:
        lessons = [lesson] if lesson else sorted(p.name for p in (pipeline.submitted / student).glob("*"))
        source = "submitted/ as it was"
    present = [name for name in lessons if layout.submission(pipeline.workspace, Key(student, name)).is_dir()]
    if not present:
        raise ValueError(f"nothing of {student!r} to regrade" + (f" in {lesson}" if lesson else ""))
    before = {name: _points_before(pipeline.workspace, name, student) for name in present}
    regraded = [Key(student, name) for name in present]
    graded = pipeline.autograde(pairs=regraded)
    changes = [_change(outcome, *before[outcome.lesson], source) for outcome in graded]
    _record(pipeline.workspace / LOG, changes)
    pages = {key for key in regraded if layout.feedback(pipeline.workspace, key).is_dir()}
    if pages:
        feedback(pipeline, pages)
    return changes


def _recorded(folder: Path) -> intake_time.Handed | None:
    """The hand-in time recorded beside a submission (None: none, or none that can be read)."""
    try:
        return intake_time.read(folder) if folder.is_dir() else None
    except intake_time.UnreadableRecord:
        return None


def _shown(handed: intake_time.Handed) -> str:
    return f"{handed.at.isoformat(timespec='seconds')} ({handed.source})"


def _keep_handed(pipeline: Pipeline, student: str, lesson: str, recorded: intake_time.Handed | None) -> None:
    """Put the hand-in time ``recorded`` before the retake back beside the submission, unless the
    new one is the LMS's own; say so when the recorded time changes."""
    folder = layout.submission(pipeline.workspace, Key(student, lesson))
    new = _recorded(folder)
    if recorded is None or new is None or new == recorded:
        return
    if new.source not in intake_time.LMS_SOURCES:
        intake_time.record(folder, recorded)
        return
    what = f"hand-in time changed by the regrade: {_shown(recorded)} -> {_shown(new)}"
    pipeline.problems.append(Problem(student, lesson, what))


def _change(
    graded: Graded, score_before: float | None, points_before: dict[str, float], source: str
) -> Change:
    after, most = graded.score
    cells = {
        grade_id: (points_before.get(grade_id), points)
        for grade_id, (points, _) in graded.scores.items()
        if points_before.get(grade_id) != points
    }
    return Change(graded.student, graded.lesson, score_before, after, most, cells, source)


def _record(log: Path, changes: list[Change]) -> None:
    """Append the changes to the regrade log (its header written once)."""
    rows: list[list[csv_files.Cell]] = [] if log.is_file() else [COLUMNS]
    now = datetime.now(UTC).isoformat(timespec="seconds")
    for change in changes:
        cells = "; ".join(
            f"{cell}: {old if old is not None else '-'} -> {new_points:g}"
            for cell, (old, new_points) in change.cells.items()
        )
        # no score before: an empty cell (a lone '-' would be text a spreadsheet reads as a formula)
        rows.append([now, change.student, change.lesson, change.before, change.after, cells, change.source])
    csv_files.write(log, rows, append=True)
