"""What a graded class did, per lesson and exercise: the class insights.

It reads the verdict files that grading wrote (``<workspace>/verdicts/<lesson>/<student>.json``,
autograder/engine/verdicts.py), and nothing a submission wrote, and counts per lesson:

* the pass rate of every test cell: the learners who got all of its points, of those graded;
* per exercise, how many learners hit each catalogued mistake: a learner counts once for a
  mistake however many of the exercise's cells named it (the names come from the catalogue
  entries the checks matched while the judge ran the cell, never from a message's text);
* per exercise, the learners who pass the visible checks and fail the hidden tests of some
  test cell: answers fitted to the visible checks' inputs, worth a look;
* the score of every learner, for the lesson's score distribution;
* the gradings that failed (a corrupt notebook, say), counted apart, never dropped.

It writes ``<workspace>/insights/index.html`` (autograder/instructor/insights_page.py: one offline
page) and, beside it, ``insights.csv``: one row per lesson, exercise and item, so that a
spreadsheet can filter by ``kind`` and sort by ``share``. Its columns:

    lesson     the lesson, e.g. 03_attention
    exercise   the exercise the row is about; empty for a row about the whole lesson
    kind       "cell pass rate"  item: a test cell's grade id; value: learners who got all its points
               "mistake"         item: a catalogued mistake's name; value: learners whose checks named it
               "visible only"    item: the test cells concerned; value: learners who passed those
                                 cells' visible checks and failed their hidden tests
               "score"           item: a learner; value: their points in the lesson
               "failed grading"  item: a learner whose notebook could not be graded; note: why
    item       what the row counts (see kind)
    value      a count of learners, or a learner's points
    out_of     learners graded (cell pass rate: those graded on that cell), or the lesson's points
    share      value / out_of, between 0 and 1, rounded to 4 places; empty for a failed grading
    students   the learners counted, separated by "; " (mistake, visible only)
    note       why a grading failed

    python -m autograder insights        # then open workspace/insights/index.html
"""

from collections import defaultdict
from pathlib import Path

from autograder.engine import csv_files, verdicts
from autograder.engine.verdicts import Verdict
from autograder.instructor import insights_page
from autograder.instructor.insights_data import CellRate, LessonInsights

FOLDER = "insights"
PAGE = "index.html"
TABLE = "insights.csv"
COLUMNS = ("lesson", "exercise", "kind", "item", "value", "out_of", "share", "students", "note")


def of_lesson(lesson: str, graded: list[Verdict]) -> LessonInsights:
    """The insights of one lesson from its verdicts (one per learner)."""
    found = LessonInsights(lesson)
    passed: dict[str, int] = defaultdict(int)
    seen: dict[str, int] = defaultdict(int)
    exercises: dict[str, str] = {}  # grade id -> exercise, in the order the verdicts list the cells
    mistakes: dict[str, dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
    visible_only: dict[str, dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
    for verdict in sorted(graded, key=lambda v: v.student):
        if verdict.failure is not None:
            found.failed[verdict.student] = verdict.failure
            continue
        found.scores[verdict.student] = (verdict.score, verdict.max_score)
        for grade_id, cell in verdict.cells.items():
            exercises.setdefault(grade_id, cell.exercise)
            seen[grade_id] += 1
            passed[grade_id] += cell.points >= cell.max_points
            for mistake in cell.mistakes:
                mistakes[cell.exercise][mistake].add(verdict.student)
            if cell.visible is True and cell.hidden is False:
                visible_only[cell.exercise][verdict.student].append(grade_id)
    found.cells = [CellRate(g, exercise, passed[g], seen[g]) for g, exercise in exercises.items()]
    found.mistakes = {
        exercise: {mistake: sorted(students) for mistake, students in sorted(named.items())}
        for exercise, named in mistakes.items()
    }
    found.visible_only = {exercise: dict(students) for exercise, students in visible_only.items()}
    return found


def read_class(workspace: Path) -> list[LessonInsights]:
    """The insights of every lesson that has verdicts in ``workspace``, in the lessons' order."""
    folder = workspace / verdicts.FOLDER
    files = sorted(folder.glob("*/*.json"))
    if not files:
        raise FileNotFoundError(
            f"no verdict files in {folder}: grade the class first (python -m autograder autograde); "
            "grading writes one verdict per submission there"
        )
    by_lesson: dict[str, list[Verdict]] = defaultdict(list)
    for file in files:
        try:
            verdict = verdicts.read(file)
        except (ValueError, TypeError, KeyError, AttributeError) as error:
            raise ValueError(
                f"{file} is not a verdict file as grading writes it ({type(error).__name__}: {error}); "
                "grade that submission again to rewrite it"
            ) from error
        by_lesson[verdict.lesson].append(verdict)
    return [of_lesson(lesson, by_lesson[lesson]) for lesson in sorted(by_lesson)]


def _share(value: float, out_of: float) -> str:
    """value / out_of to four places, as text that keeps them (never negative: written as it is)."""
    return f"{value / out_of:.4f}" if out_of else ""


def rows(found: LessonInsights) -> list[dict[str, csv_files.Cell]]:
    """The CSV rows of one lesson (see the module's docstring for the columns)."""
    lesson, graded = found.lesson, found.graded
    out = [
        {"exercise": c.exercise, "kind": "cell pass rate", "item": c.grade_id, "value": c.passed,
         "out_of": c.graded, "share": _share(c.passed, c.graded)}
        for c in found.cells
    ]  # fmt: skip
    for exercise, mistake, count in found.mistake_counts():
        students = "; ".join(found.mistakes[exercise][mistake])
        out.append(
            {"exercise": exercise, "kind": "mistake", "item": mistake, "value": count,
             "out_of": graded, "share": _share(count, graded), "students": students}
        )  # fmt: skip
    for exercise, students in sorted(found.visible_only.items()):
        cells = sorted({grade_id for cells in students.values() for grade_id in cells})
        out.append(
            {"exercise": exercise, "kind": "visible only", "item": "; ".join(cells),
             "value": len(students), "out_of": graded, "share": _share(len(students), graded),
             "students": "; ".join(sorted(students))}
        )  # fmt: skip
    for student, (score, most) in found.scores.items():
        out.append(
            {"kind": "score", "item": student, "value": float(score), "out_of": float(most),
             "share": _share(score, most)}
        )  # fmt: skip
    for student, why in found.failed.items():
        out.append({"kind": "failed grading", "item": student, "note": why})
    return [{column: row.get(column, "") for column in COLUMNS} | {"lesson": lesson} for row in out]


def write_table(found: list[LessonInsights], target: Path) -> Path:
    """insights.csv: the header, then every lesson's rows (autograder/engine/csv_files.py writes
    no text cell a spreadsheet would run)."""
    table = [[row[column] for column in COLUMNS] for lesson in found for row in rows(lesson)]
    return csv_files.write(target, [COLUMNS, *table])


def insights(workspace: Path, out: Path | None = None) -> Path:
    """Write the class insights of ``workspace`` into ``out`` (default: <workspace>/insights/):
    an offline page, index.html, and insights.csv beside it. Returns the page's path."""
    found = read_class(workspace)
    folder = out or workspace / FOLDER
    folder.mkdir(parents=True, exist_ok=True)
    write_table(found, folder / TABLE)
    page = folder / PAGE
    page.write_text(insights_page.page(found, csv_name=TABLE), encoding="utf-8")
    return page
