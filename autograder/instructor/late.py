"""Late work: due dates, extensions and the penalty, applied at export and stated in the feedback.

The instructor writes ``course.toml`` in the grading workspace::

    timezone = "Europe/Berlin"          # the course's time zone (an IANA name); default "UTC"

    [due]                               # a lesson's due date; lessons not listed have none
    01_embedding = "2026-10-09 23:59"   # in the course's time zone
    02_positional_encoding = "2026-10-16 23:59:59+02:00"   # or with an explicit offset ("Z": UTC)

    [penalty]                           # leave it out, or write policy = "none": nothing deducted
    per_day = 10                        # percent of the points earned, per started day late
    cap = 50                            # percent, at most (default 100)

    [canvas]                            # optional, read by autograder/instructor/lms.py
    01_embedding = 12345                # the Canvas assignment id of a lesson's column

and, when some learners have more time, ``extensions.csv`` next to it, one row per extension
(the header as shown; a byte-order mark is fine)::

    student,lesson,due
    cho,03_attention,2026-10-30 23:59

How lateness counts (stated here because students will ask):

* a submission handed in at the due date to the second, or before, is on time; there is no
  grace period;
* every started 24 hours after the due date is one day late: one second late is 1 day, 24 h
  exactly is 1 day, 24 h and one second is 2 days. Hours are elapsed hours, so the night the
  clocks change is 23 or 25 hours long on the wall and still 24 hours here;
* the penalty is ``per_day`` percent of the points the submission earned, per day late, at
  most ``cap`` percent: 6 points handed in 1 day late with ``per_day = 10`` are 5.4;
* lateness known only from the files' own time (no LMS or nbgrader time was recorded) is
  stated and reported, never deducted: that time may be when the work was collected;
* a due date written without an offset is read in the course's time zone; one that falls in
  the hour the clocks skip is refused, one that falls in the hour that happens twice is its
  first occurrence.

Every mistake in either file raises ``CourseFileError``, which names the file, the key or
line, what it found and what was expected.
"""

import csv
import math
import re
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time
from pathlib import Path
from zoneinfo import ZoneInfo

from autograder import lessons
from autograder.engine import durations, intake_time
from autograder.engine.intake_time import Handed
from autograder.engine.submission import Problem
from autograder.engine.workspace import (
    COURSE_FILE,
    EXTENSIONS_FILE,
    STUDENT_ID,
    STUDENT_ID_RULE,
    CourseFileError,
    Key,
    read_course_file,
    submission,
    time_zone,
)

# A file's modification time may be when the work was collected or copied, not when it was handed
# in: lateness known only from it is stated, never deducted (no honest student is penalised on it).
UNPROVEN = (
    "that time may be when your work was collected, so no points are deducted; your instructor will "
    "check when it was handed in."
)
# A due date written as text: a date and a time, then perhaps seconds and an offset.
DUE_TEXT = re.compile(r"\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:?\d{2})?")
DUE_EXPECTED = (
    'a date and time such as "2026-12-04 23:59" (in the course\'s time zone) or "2026-12-04 23:59+01:00"'
)
DAY_S = 24 * 3600


@dataclass(frozen=True)
class Policy:
    """The course's late-work rules: its time zone, due dates, extensions and penalty (percentages)."""

    zone: ZoneInfo = field(default_factory=lambda: ZoneInfo("UTC"))
    due: dict[str, datetime] = field(default_factory=dict)
    extensions: dict[Key, datetime] = field(default_factory=dict)
    per_day: float = 0.0
    cap: float = 100.0

    def due_for(self, student: str, lesson: str) -> tuple[datetime | None, bool]:
        """The due date that holds for ``student`` in ``lesson`` (None: none), and whether it is
        an extension."""
        extended = self.extensions.get(Key(student, lesson))
        if extended is not None:
            return extended, True
        return self.due.get(lesson), False


@dataclass(frozen=True)
class Late:
    """What lateness did to one submission: whole days late, percent deducted, the score after
    the deduction, and the sentence the student's feedback shows (None: the lesson has no due date)."""

    days: int
    percent: float
    score: float
    statement: str | None


def load(workspace: Path) -> Policy:
    """The policy written in the workspace's course.toml and extensions.csv (no file: no due dates)."""
    settings = read_course_file(workspace)
    path = workspace / COURSE_FILE
    zone = time_zone(settings.get("timezone", "UTC"), path)
    due = {
        lesson: _due(value, zone, f"{path}: [due] {lesson}")
        for lesson, value in _table(settings, "due", path).items()
        if known_lesson(lesson, f"{path}: [due]")
    }
    per_day, cap = _penalty(_table(settings, "penalty", path), path)
    return Policy(zone, due, _extensions(workspace / EXTENSIONS_FILE, zone), per_day, cap)


def _table(settings: dict, name: str, path: Path) -> dict:
    table = settings.get(name, {})
    if not isinstance(table, dict):
        raise CourseFileError(f"{path}: {name} is {table!r}; expected a table [{name}]")
    return table


def known_lesson(lesson: str, where: str) -> bool:
    """True for a lesson of the course; CourseFileError, saying ``where``, for any other name."""
    if lesson not in lessons.LESSON_NAMES:
        raise CourseFileError(
            f"{where}: unknown lesson {lesson!r}; expected one of {', '.join(lessons.LESSON_NAMES)}"
        )
    return True


def _due(value: object, zone: ZoneInfo, where: str) -> datetime:
    """A due date from TOML (text, or a TOML date-time) as an aware datetime."""
    if isinstance(value, str):
        if not DUE_TEXT.fullmatch(value.strip()):
            raise CourseFileError(f"{where} = {value!r}; expected {DUE_EXPECTED}")
        value = datetime.fromisoformat(value.strip())
    if not isinstance(value, datetime):  # a TOML date or time alone: the day's end or start is a guess
        kind = "a date without a time" if isinstance(value, date) else repr(value)
        if isinstance(value, time):
            kind = "a time without a date"
        raise CourseFileError(f"{where} is {kind}; expected {DUE_EXPECTED}")
    if value.tzinfo is not None:
        return value
    placed = value.replace(tzinfo=zone)
    if placed.astimezone(UTC).astimezone(zone).replace(tzinfo=None) != value:
        raise CourseFileError(
            f"{where} = {value:%Y-%m-%d %H:%M} does not exist in {zone.key} (the clocks skip that hour); "
            f"expected {DUE_EXPECTED}"
        )
    return placed


def _penalty(table: dict, path: Path) -> tuple[float, float]:
    """(per_day, cap) in percent from the [penalty] table."""
    unknown = sorted(set(table) - {"policy", "per_day", "cap"})
    if unknown:
        raise CourseFileError(
            f"{path}: [penalty] unknown key(s) {', '.join(unknown)}; expected per_day and cap, or policy"
        )
    if "policy" in table:
        if table["policy"] != "none" or len(table) > 1:
            raise CourseFileError(
                f'{path}: [penalty] policy = {table["policy"]!r}; expected policy = "none" alone, '
                "or per_day (and cap) without policy"
            )
        return 0.0, 100.0
    return _percent(table, "per_day", 0.0, path), _percent(table, "cap", 100.0, path)


def _percent(table: dict, key: str, default: float, path: Path) -> float:
    value = table.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 100:
        raise CourseFileError(f"{path}: [penalty] {key} = {value!r}; expected a percentage from 0 to 100")
    return float(value)


def _extensions(path: Path, zone: ZoneInfo) -> dict[Key, datetime]:
    """(student, lesson) -> due date, from extensions.csv (none when there is no file)."""
    if not path.is_file():
        return {}
    try:
        rows = list(csv.reader(path.read_text(encoding="utf-8-sig").splitlines()))
    except UnicodeDecodeError:
        raise CourseFileError(f"{path}: not UTF-8 text; expected a CSV file saved as UTF-8") from None
    header = [cell.strip().lower() for cell in rows[0]] if rows else []
    if header[:3] != ["student", "lesson", "due"]:
        raise CourseFileError(
            f"{path}: line 1 is {rows[0] if rows else 'missing'}; expected the header student,lesson,due"
        )
    found: dict[Key, datetime] = {}
    for number, row in enumerate(rows[1:], 2):
        if not any(cell.strip() for cell in row):
            continue
        if len(row) < 3:
            raise CourseFileError(
                f"{path}: line {number} has {len(row)} column(s); expected student,lesson,due"
            )
        student, lesson, due = (cell.strip() for cell in row[:3])
        where = f"{path}: line {number}"
        if not STUDENT_ID.fullmatch(student):
            raise CourseFileError(f"{where}: {student!r} is not a student id ({STUDENT_ID_RULE})")
        known_lesson(lesson, where)
        if Key(student, lesson) in found:
            raise CourseFileError(
                f"{where}: a second extension for {student} in {lesson}; expected one per student and lesson"
            )
        found[Key(student, lesson)] = _due(due, zone, f"{where}: due")
    return found


def handed_times(
    root: Path, keys: list[Key], zone: ZoneInfo
) -> tuple[dict[Key, Handed | None], list[Problem]]:
    """When each (student, lesson) of the workspace ``root`` was handed in, as the intake recorded it;
    where it recorded nothing (a workspace collected before it did), the folder's time. A record
    that cannot be read is a problem, and the folder's time stands in."""
    found: dict[Key, Handed | None] = {}
    problems = []
    for key in (Key(*pair) for pair in keys):
        folder = submission(root, key)
        if not folder.is_dir():
            found[key] = None
            continue
        try:
            found[key] = intake_time.read(folder)
        except intake_time.UnreadableRecord as error:
            problems.append(Problem(*key, f"{error}; the folder's time is used instead"))
            found[key] = None
        if found[key] is None:
            found[key], reason = intake_time.from_folder(folder, zone)
            if reason:
                problems.append(Problem(*key, reason))
    return found, problems


def lateness(handed: datetime, due: datetime) -> int:
    """Days late: every started 24 elapsed hours after ``due`` (both aware; any zones) is one day.
    At the due date to the second, or before it, is 0."""
    seconds = (handed.astimezone(UTC) - due.astimezone(UTC)).total_seconds()
    return math.ceil(seconds / DAY_S) if seconds > 0 else 0


def penalty(days_late: int, policy: Policy) -> float:
    """The percent of the earned points deducted for ``days_late`` days: per_day each, at most cap."""
    return min(days_late * policy.per_day, policy.cap)


def assess(policy: Policy, student: str, lesson: str, handed: Handed | None, score: float) -> Late:
    """What ``policy`` does to ``student``'s ``lesson``, handed in at ``handed`` with ``score`` points."""
    due, extended = policy.due_for(student, lesson)
    if due is None:
        return Late(0, 0.0, score, None)
    due_text = f"the due date {_shown(due, policy.zone)}" + (" (extended for you)" if extended else "")
    if handed is None:
        return Late(0, 0.0, score, f"No hand-in time was recorded, so no late penalty applies ({due_text}).")
    days = lateness(handed.at, due)
    witness = intake_time.SOURCE_WORDS[handed.source]
    handed_text = f"Handed in {_shown(handed.at, policy.zone)} ({policy.zone.key}; time taken from {witness})"
    if days == 0:
        return Late(0, 0.0, score, f"{handed_text}, on time for {due_text}.")
    after = durations.in_words((handed.at.astimezone(UTC) - due.astimezone(UTC)).total_seconds())
    counted = f"{handed_text}, {after} after {due_text}, counted as {days} day{'s' * (days != 1)} late"
    if handed.source in intake_time.UNPROVEN:  # a copy's or a download's time: no proof of the hand-in
        return Late(days, 0.0, score, f"{counted} by the file's time alone; {UNPROVEN}")
    percent = penalty(days, policy)
    if percent == 0:
        return Late(days, 0.0, score, f"{counted}; no points are deducted for late work in this course.")
    kept = round(score * (100 - percent) / 100, 2)
    capped = (
        " (the most this course deducts)"
        if percent == policy.cap and days * policy.per_day > policy.cap
        else ""
    )
    return Late(
        days, percent, kept, f"{counted}; {percent:g}% of the points deducted{capped}: {score:g} -> {kept:g}."
    )


def statement(policy: Policy, student: str, lesson: str, handed: Handed | None, score: float) -> str | None:
    """The sentence about lateness that ``student``'s feedback for ``lesson`` shows (None: no due date)."""
    return assess(policy, student, lesson, handed, score).statement


def _shown(moment: datetime, zone: ZoneInfo) -> str:
    """'2026-12-04 23:59' in the course's zone, with seconds only when there are some."""
    local = moment.astimezone(zone)
    return local.strftime("%Y-%m-%d %H:%M:%S" if local.second or local.microsecond else "%Y-%m-%d %H:%M")
