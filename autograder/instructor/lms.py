"""Grades an LMS takes: Canvas's and Moodle's gradebook imports, from a roster the instructor gives.

The roster (``roster.csv``) is UTF-8 CSV (a byte-order mark is fine) with a header row. Only
``student`` is required: the id the submissions use (the folder or file name the intake took
in). The others are read when present, and any further column is ignored::

    student,name,canvas_id,sis_user_id,sis_login_id,section,email,id_number
    ada,"Çetin, Ada",1001,S1001,ada@uni.example,Group A,ada@uni.example,2024-0001

Header names are read without regard to case, spaces or hyphens ("SIS User ID" is
``sis_user_id``, "Email" is ``email``). Every ``student`` must be a plain id, once.

Canvas's own gradebook export (Grades, Export, "Export Entire Gradebook") is a roster as it is:
a file whose first two columns are Student and ID is read as one. Its columns are Student (the
sortable name, "Last, First"), ID (Canvas's user id), SIS User ID, SIS Login ID, Section, then
an assignment per column (Canvas's help pages and its export, as the nemogb project documents
them). ID is the ``student`` and ``canvas_id`` (a Canvas download names each file by it, see
autograder/engine/intake.py), Student the ``name``. Rows that are no learner are passed over:
the points-possible row (Student "Points Possible", no ID), rows with neither a name nor an ID
(the row some exports add for manual posting), and Canvas's test student ("Student, Test",
made by Student View).

How the files are written, and what that rests on (Canvas's and Moodle's documentation and
their own exports, in our words):

* Canvas: the columns of Canvas's own gradebook export, which its import reads back: Student
  (the display name), ID (Canvas's user id), SIS User ID, SIS Login ID, Section, then one
  column per lesson. A column named "<lesson> (<assignment id>)" updates that assignment;
  a name without an id makes Canvas create a new assignment on import (the ids come from
  course.toml's ``[canvas]`` table). The second row is the points-possible row, as in
  Canvas's export: "    Points Possible" under Student, the lesson's maximum under each
  lesson. Canvas matches a row to a learner by ID, SIS User ID or SIS Login ID; an empty cell
  changes nothing there.
* Moodle: "Import grades from CSV" lets the instructor map any column onto a user field;
  we write "ID number" and "Email address" first (map either to ``useridnumber`` or
  ``useremail``: Moodle compares email addresses case-sensitively, so they are written as
  the roster has them), the name, then one column per lesson to map onto its grade item.

Both files are UTF-8 without a byte-order mark, written by autograder/engine/csv_files.py (commas
and quotes inside names are quoted and doubled; a name that starts like a formula, such as
``=HYPERLINK(...)``, gets a single quote in front, so that a spreadsheet shows it as text): both
LMSs read UTF-8 as it is. Excel, opening such a file by double-click, misreads non-Latin letters;
upload the file itself, not a copy saved by Excel.

Scores are after late penalties (autograder/instructor/grades.py gives them). Nobody is dropped silently:
a graded student missing from the roster, and a roster entry with no graded submission, come
back as ``Problem`` rows for the report and problems.csv.
"""

import csv
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from autograder import lessons
from autograder.engine import csv_files
from autograder.engine.pipeline import Pipeline
from autograder.engine.plain_text import report_line
from autograder.engine.submission import Problem
from autograder.engine.workspace import (
    COURSE_FILE,
    STUDENT_ID,
    STUDENT_ID_RULE,
    CourseFileError,
    Key,
    read_course_file,
)
from autograder.instructor import late

ROSTER_COLUMNS = (
    "student",
    "name",
    "canvas_id",
    "sis_user_id",
    "sis_login_id",
    "section",
    "email",
    "id_number",
)
CANVAS_HEADER = ["Student", "ID", "SIS User ID", "SIS Login ID", "Section"]
CANVAS_POINTS_ROW = "    Points Possible"  # as Canvas's own export writes it
# Canvas's gradebook export: its first two columns, and the roster columns its others give.
CANVAS_EXPORT_START = ["student", "id"]
CANVAS_EXPORT_COLUMNS = ("sis_user_id", "sis_login_id", "section")
CANVAS_TEST_STUDENT = "Student, Test"  # the learner Student View makes, as the export names it
MOODLE_HEADER = ["ID number", "Email address", "Full name"]
MOODLE_MATCH = ("email", "id_number")  # the roster's columns Moodle can match a user by
KINDS = ("canvas", "moodle-email", "moodle-id_number")  # the files `export --canvas/--moodle` writes
# Characters a roster name (which learners set themselves in the LMS) never needs, and which
# nbgrader's Formgrader would read as markup: its submission page writes the gradebook's names
# into HTML unescaped (formgrade_macros.html.j2).
MARKUP = str.maketrans("", "", "<>&")  # the page writes names as text, never into an attribute


class Scored(Protocol):
    """A grade as an LMS file takes it: the points after late work, and the most there are
    (autograder/instructor/grades.py's Grade)."""

    @property
    def score(self) -> float: ...

    @property
    def max_score(self) -> float: ...


class RosterError(ValueError):
    """A roster that cannot be used: the message names the file, the line and what was expected."""


@dataclass(frozen=True)
class Person:
    """One learner as the roster names them (empty strings where a column is absent)."""

    student: str
    name: str = ""
    canvas_id: str = ""
    sis_user_id: str = ""
    sis_login_id: str = ""
    section: str = ""
    email: str = ""
    id_number: str = ""


@dataclass(frozen=True)
class Roster:
    """The people of a roster file, in its order, and the file's name (for the report)."""

    name: str
    people: list[Person]


def _column(name: str) -> str:
    return re.sub(r"[\s\-]+", "_", name.strip().lower())


def _rows(path: Path) -> list[list[str]]:
    try:
        return list(csv.reader(path.read_text(encoding="utf-8-sig").splitlines()))
    except UnicodeDecodeError:
        raise RosterError(f"{path}: not UTF-8 text; expected a CSV file saved as UTF-8") from None
    except OSError as error:
        raise RosterError(f"{path}: cannot be read ({error.strerror})") from None


def _where(path: Path, header: list[str]) -> dict[str, int]:
    """Roster column -> its index in ``header``; a Canvas gradebook export's ID is the student."""
    if header[:2] == CANVAS_EXPORT_START:
        found = {name: header.index(name) for name in CANVAS_EXPORT_COLUMNS if name in header}
        return {"student": 1, "canvas_id": 1, "name": 0, **found}
    if "student" not in header:
        raise RosterError(
            f"{path}: line 1 has no 'student' column (the id the submissions use); "
            f"expected a header such as {','.join(ROSTER_COLUMNS)}, or Canvas's gradebook export "
            "(Student,ID,SIS User ID,...)"
        )
    repeated = sorted({name for name in header if header.count(name) > 1 and name in ROSTER_COLUMNS})
    if repeated:
        raise RosterError(f"{path}: line 1 names {', '.join(repeated)} more than once; expected each once")
    return {name: header.index(name) for name in ROSTER_COLUMNS if name in header}


def _no_learner(values: dict[str, str], canvas: bool) -> bool:
    """Whether a row of Canvas's gradebook export is not a learner's: the points-possible row, a
    row with no name and no ID, the test student."""
    if not canvas:
        return False
    unnamed = not values["student"] and values["name"] in ("", "Points Possible")
    return unnamed or values["name"] == CANVAS_TEST_STUDENT


def read_roster(path: Path) -> Roster:
    """The roster in ``path`` (the course's roster, or Canvas's gradebook export); RosterError for
    a missing id column, a bad or repeated id."""
    rows = _rows(path)
    header = [_column(cell) for cell in rows[0]] if rows else []
    where = _where(path, header)
    canvas = header[:2] == CANVAS_EXPORT_START
    id_said = "ID" if canvas else "student"
    people: list[Person] = []
    seen: dict[str, int] = {}
    for number, row in enumerate(rows[1:], 2):
        if not any(cell.strip() for cell in row):
            continue
        values = {name: row[index].strip() if index < len(row) else "" for name, index in where.items()}
        if _no_learner(values, canvas):
            continue
        student = values["student"]
        if not STUDENT_ID.fullmatch(student):
            raise RosterError(
                f"{path}: line {number}: {id_said} {student!r} is not a student id "
                f"({STUDENT_ID_RULE}, as the submissions are named)"
            )
        if student in seen:
            raise RosterError(
                f"{path}: line {number}: {id_said} {student} is on line {seen[student]} already"
            )
        seen[student] = number
        people.append(Person(**values))
    return Roster(path.name, people)


def roster_report(roster: Roster, graded: dict[Key, Scored]) -> list[Problem]:
    """Graded students missing from the roster (a problem per submission: its score is left out
    of the export), and roster entries with no graded submission in a lesson that is exported
    (one problem per student, naming the lessons)."""
    known = {person.student for person in roster.people}
    exported = _lessons(graded)
    problems = [
        Problem(
            student,
            lesson,
            f"graded ({_number(graded[student, lesson].score)} points) but not in the roster {roster.name}: "
            "left out of the export",
        )
        for student, lesson in sorted(graded)
        if student not in known
    ]
    for person in roster.people:
        missing = [lesson for lesson in exported if (person.student, lesson) not in graded]
        if missing and len(missing) == len(exported):
            what = f"in the roster {roster.name} but no graded submission: left out of the export"
            problems.append(Problem(person.student, "-", what))
        elif missing:  # one line per student, not one per lesson: a class's report stays readable
            numbers = ", ".join(lesson.split("_", 1)[0] for lesson in missing)
            what = (
                f"in the roster {roster.name} but no graded submission of {len(missing)} of {len(exported)} "
                f"lessons ({numbers}): their cells are left empty"
            )
            problems.append(Problem(person.student, "-", what))
    return problems


def _lessons(graded: dict[Key, Scored]) -> list[str]:
    present = {lesson for _, lesson in graded}
    return [lesson for lesson in lessons.LESSON_NAMES if lesson in present]


def _number(value: float) -> str:
    """A score as an LMS reads it: '5.4', '6', never '6.0000001' nor '1e+03'."""
    return csv_files.cell(_points(value))


def _points(value: float) -> float:
    """A score to two decimals, as the LMS files hold it (csv_files writes 6.0 as '6')."""
    return round(value, 2)


def canvas_csv(path: Path, roster: Roster, graded: dict[Key, Scored], ids: dict[str, int]) -> list[Problem]:
    """Write Canvas's gradebook import to ``path`` (``ids``: lesson -> Canvas assignment id, where
    known); return the roster report."""
    columns = _lessons(graded)
    titles = [f"{lesson} ({ids[lesson]})" if lesson in ids else lesson for lesson in columns]
    points = [
        _points(max(value.max_score for (_, done), value in graded.items() if done == lesson))
        for lesson in columns
    ]
    rows = [CANVAS_HEADER + titles, [CANVAS_POINTS_ROW, "", "", "", "", *points]]
    for person in roster.people:
        cells = [graded.get((person.student, lesson)) for lesson in columns]
        if any(cells):
            who = [person.name or person.student, person.canvas_id, person.sis_user_id, person.sis_login_id]
            rows.append([*who, person.section, *[_points(cell.score) if cell else None for cell in cells]])
    csv_files.write(path, rows)
    return roster_report(roster, graded)


def moodle_csv(path: Path, roster: Roster, graded: dict[Key, Scored], match_by: str) -> list[Problem]:
    """Write Moodle's CSV grade import to ``path``, to be matched by ``match_by`` ("email" or
    "id_number"); return the roster report, and a problem for each graded person the roster gives
    no such value (a row that matches nobody would stop Moodle's import, so it is left out)."""
    if match_by not in MOODLE_MATCH:
        raise ValueError(f"match_by is {match_by!r}; expected one of {', '.join(MOODLE_MATCH)}")
    columns = _lessons(graded)
    rows = [MOODLE_HEADER + columns]
    problems = []
    for person in roster.people:
        cells = [graded.get((person.student, lesson)) for lesson in columns]
        if not any(cells):
            continue
        if not getattr(person, match_by):
            what = f"the roster {roster.name} gives no {match_by} to match in Moodle: left out of the export"
            problems.append(Problem(person.student, "-", what))
            continue
        who = [person.id_number, person.email, person.name or person.student]
        rows.append([*who, *[_points(cell.score) if cell else None for cell in cells]])
    csv_files.write(path, rows)
    return roster_report(roster, graded) + problems


def canvas_ids(workspace: Path) -> dict[str, int]:
    """Lesson -> Canvas assignment id, from the ``[canvas]`` table of the workspace's course.toml."""
    path = workspace / COURSE_FILE
    table = read_course_file(workspace).get("canvas", {})
    if not isinstance(table, dict):
        raise CourseFileError(f"{path}: canvas is {table!r}; expected a table [canvas]")
    for lesson, value in table.items():
        late.known_lesson(lesson, f"{path}: [canvas]")
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise CourseFileError(
                f"{path}: [canvas] {lesson} = {value!r}; expected a Canvas assignment id (a number)"
            )
    return dict(table)


def write(
    kind: str, out: Path, roster: Roster, graded: dict[Key, Scored], ids: dict[str, int]
) -> list[Problem]:
    """The import of ``kind`` (one of KINDS) with the grades ``graded`` for the people of ``roster``
    (``ids``: lesson -> Canvas assignment id); returns the roster report."""
    if kind == "canvas":
        return canvas_csv(out, roster, graded, ids)
    return moodle_csv(out, roster, graded, kind.removeprefix("moodle-"))


def _first_last(name: str) -> tuple[str, str]:
    """A roster's display name as (first, last), on one line and without < > &:
    "Çetin, Ada" and "Ada Çetin" are ("Ada", "Çetin")."""
    name = report_line(name).translate(MARKUP)
    if "," in name:
        last, first = name.split(",", 1)
        return first.strip(), last.strip()
    first, _, last = name.strip().rpartition(" ")
    return (first, last) if first else (last, "")


def name_students(pipeline: Pipeline, roster: Path) -> None:
    """Give the gradebook's students the roster's names, so that the Formgrader shows them:
    "Last, First" is split at its comma, "First Last" at its last space."""
    with pipeline.gradebook() as gb:
        known = {student.id for student in gb.students}
        for person in read_roster(roster).people:
            if person.student in known and person.name:
                first, last = _first_last(person.name)
                gb.update_or_create_student(person.student, first_name=first, last_name=last)
