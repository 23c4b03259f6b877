"""The grading workspace as one model: its folders and files, whose submission a folder is, the
gradebook's URL, the course's time zone and the list of problems.

A workspace (``python -m autograder --workspace``, outside the repository's tracked tree) holds::

    course.toml, extensions.csv   the instructor's: time zone, due dates, penalty, extensions
    release/<lesson>/             the learners' notebooks `release` generated (unless told elsewhere)
    submitted/<student>/<lesson>/ what the intake took in, with its hand-in time
    unzipped/<student>/<lesson>/  a notebook read out of an LMS download, before it is taken in
    replaced/<student>/<lesson>/  a submission a regrade replaced, kept
    autograded/, feedback/        nbgrader's graded notebooks, and the learners' pages
    exchange/                     the Formgrader's exchange (no learner fetches from it)
    gradebook.db                  nbgrader's gradebook, unless --db names another
    problems.csv                  what could not be graded as handed in, and why

A submission is named by a ``Key`` (student, lesson), in that order everywhere. A student id
becomes a folder name, so it is checked against ``STUDENT_ID`` wherever one comes from outside
(a download's names, a roster, extensions.csv, a folder's names).
"""

import csv
import re
import tomllib
from collections.abc import Iterable
from pathlib import Path
from typing import NamedTuple
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from autograder.engine import csv_files

SUBMITTED = "submitted"
RELEASE = "release"
UNZIPPED = "unzipped"
REPLACED = "replaced"
FEEDBACK = "feedback"
EXCHANGE = "exchange"
GRADEBOOK = "gradebook.db"
COURSE_FILE = "course.toml"
EXTENSIONS_FILE = "extensions.csv"
PROBLEMS_FILE = "problems.csv"

# A student id becomes a folder name: a plain name, never "..", never a path.
STUDENT_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._\-]*")
STUDENT_ID_RULE = "letters, digits, '.', '_', '-'"
# The tables course.toml may hold (autograder/instructor/late.py and lms.py read them).
COURSE_TABLES = {"timezone", "due", "penalty", "canvas"}
# How long a grader waits for another's short write to the SQLite gradebook (SQLite's default: 5 s).
SQLITE_TIMEOUT_S = 60


class Key(NamedTuple):
    """Whose submission of which lesson: (student, lesson), the one order every module keys by."""

    student: str
    lesson: str


class CourseFileError(ValueError):
    """A mistake in course.toml or extensions.csv: the message says where, what, and what was expected."""


def submitted(root: Path) -> Path:
    """The folder of every submission taken in."""
    return root / SUBMITTED


def submission(root: Path, key: Key) -> Path:
    """The folder of one submission: ``submitted/<student>/<lesson>/``."""
    return root / SUBMITTED / key.student / key.lesson


def feedback(root: Path, key: Key | None = None) -> Path:
    """The feedback folder, or one submission's pages in it: ``feedback/<student>/<lesson>/``."""
    return root / FEEDBACK if key is None else root / FEEDBACK / key.student / key.lesson


def release(root: Path) -> Path:
    """Where `release` writes the learners' notebooks unless it is told another folder."""
    return root / RELEASE


def sqlite_url(root: Path) -> str:
    """The workspace's own gradebook. Parallel graders wait up to a minute for each other's
    short writes, instead of failing at once on a locked database (SQLite's default is 5 s)."""
    return f"sqlite:///{root / GRADEBOOK}?timeout={SQLITE_TIMEOUT_S}"


def gradebook_url(root: Path, db_url: str | None) -> str:
    """``db_url`` (any SQLAlchemy URL), or the workspace's SQLite gradebook with its timeout."""
    return db_url or sqlite_url(root)


def read_course_file(root: Path) -> dict:
    """course.toml of the workspace as a dict ({} when there is none); unknown tables are refused."""
    path = root / COURSE_FILE
    if not path.is_file():
        return {}
    try:
        settings = tomllib.loads(path.read_text(encoding="utf-8-sig"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as error:
        raise CourseFileError(f"{path}: not valid TOML ({error})") from None
    unknown = sorted(set(settings) - COURSE_TABLES)
    if unknown:
        raise CourseFileError(
            f"{path}: unknown key(s) {', '.join(unknown)}; expected only {sorted(COURSE_TABLES)}"
        )
    return settings


def time_zone(name: object, path: Path) -> ZoneInfo:
    """The zone course.toml's ``timezone`` names; CourseFileError for anything but an IANA name."""
    if not isinstance(name, str):
        raise CourseFileError(
            f'{path}: timezone = {name!r}; expected an IANA zone name such as "Europe/Berlin"'
        )
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise CourseFileError(
            f"{path}: timezone = {name!r} is no time zone known here; "
            'expected an IANA name such as "Europe/Berlin"'
        ) from None


def course_zone(root: Path) -> ZoneInfo:
    """The course's time zone, from course.toml (UTC when it names none)."""
    return time_zone(read_course_file(root).get("timezone", "UTC"), root / COURSE_FILE)


def save_problems(root: Path, found: Iterable[tuple[str, str, str]]) -> Path:
    """problems.csv: earlier runs' rows and the (student, lesson, problem) rows ``found``, once each."""
    path = root / PROBLEMS_FILE
    known: set[tuple[str, ...]] = set()  # earlier runs' rows, as csv_files writes them
    if path.exists():
        with path.open(newline="", encoding="utf-8") as handle:
            known = {tuple(map(csv_files.cell, row)) for row in list(csv.reader(handle))[1:]}
    new = {tuple(map(csv_files.cell, row)) for row in found}
    return csv_files.write(path, [("student", "lesson", "problem"), *sorted(known | new)])
