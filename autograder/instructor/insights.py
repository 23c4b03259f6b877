"""What a graded class did, per lesson and exercise: the class insights.

It reads the verdict files that grading wrote (``<workspace>/verdicts/<lesson>/<student>.json``,
autograder/engine/verdicts.py), and nothing a submission wrote, and counts per lesson:

* the pass rate of every test cell: the learners who got all of its points, of those graded;
* per test cell, the learners who did not attempt it (their stub still raised
  NotImplementedError when the judge ran the cell) and those whose written code failed it with
  no catalogued mistake named: what the catalogue does not explain yet;
* per exercise, how many learners hit each catalogued mistake, with the catalogue's hint for it
  (what to tell the class): a learner counts once for a mistake however many of the exercise's
  cells named it (the names come from the catalogue entries the checks matched while the judge
  ran the cell, never from a message's text);
* per exercise, the learners who pass the visible checks and fail the hidden tests of some
  test cell: answers fitted to the visible checks' inputs, worth a look;
* the score of every learner, for the lesson's score distribution, and the cells a grader
  scored by hand in nbgrader's Formgrader (from the gradebook, where there is one);
* the gradings that failed (a corrupt notebook, say), counted apart, never dropped.

It writes ``<workspace>/insights/index.html`` (autograder/instructor/insights_page.py: one offline
page) and, beside it, ``insights.csv``: one row per lesson, exercise and item, so that a
spreadsheet can filter by ``kind`` and sort by ``share``. Its columns:

    lesson     the lesson, e.g. 03_attention
    exercise   the exercise the row is about; empty for a row about the whole lesson
    kind       "cell pass rate"  item: a test cell's grade id; value: learners who got all its points
               "not attempted"   item: a test cell; value: learners whose stub still raised
                                 NotImplementedError there
               "no named mistake" item: a test cell; value: learners whose written code failed it
                                 with no catalogued mistake named
               "mistake"         item: a catalogued mistake's name; value: learners whose checks named
                                 it; hint: the catalogue's hint for it
               "visible only"    item: the test cells concerned; value: learners who passed those
                                 cells' visible checks and failed their hidden tests
               "score"           item: a learner; value: their points in the lesson, as graded
               "manual score"    item: a learner; value: the points a grader gave a cell by hand;
                                 note: the cell, and what autograding gave it
               "failed grading"  item: a learner whose notebook could not be graded; note: why
    item       what the row counts (see kind)
    value      a count of learners, or a learner's points
    out_of     learners graded (cell rows: those graded on that cell), or the points possible
    share      value / out_of, between 0 and 1, rounded to 4 places; empty for a failed grading
    students   the learners counted, separated by "; " (not attempted, no named mistake,
               mistake, visible only)
    hint       what to tell the class about a mistake, from the catalogue (mistake rows)
    note       why a grading failed; which cell a manual score is for

    python -m autograder insights                        # then open workspace/insights/index.html
    python -m autograder insights --lesson 03_attention  # that lesson only: a page of its own
"""

from collections import defaultdict
from pathlib import Path

from nbgrader.api import Grade, Gradebook

from autograder import lessons
from autograder.checks.core import catalogue_data
from autograder.engine import csv_files, verdicts
from autograder.engine.nbgrader_config import COURSE_ID
from autograder.engine.verdicts import Verdict
from autograder.engine.workspace import GRADEBOOK, sqlite_url
from autograder.instructor import insights_page
from autograder.instructor.insights_data import CellRate, LessonInsights, ManualScore

FOLDER = "insights"
PAGE = "index.html"
TABLE = "insights.csv"
COLUMNS = ("lesson", "exercise", "kind", "item", "value", "out_of", "share", "students", "hint", "note")


def hints() -> dict[tuple[str, str], str]:
    """(exercise, mistake) -> the catalogue's hint for it (autograder/checks/catalogue/*.toml)."""
    return {
        (exercise, entry["name"]): entry["hint"]
        for exercise, entries in catalogue_data().items()
        for entry in entries
    }


def of_lesson(lesson: str, graded: list[Verdict], manual: list[ManualScore] | None = None) -> LessonInsights:
    """The insights of one lesson from its verdicts (one per learner), and the cells of it that
    a grader scored by hand (``manual``)."""
    found = LessonInsights(lesson)
    passed: dict[str, int] = defaultdict(int)
    seen: dict[str, int] = defaultdict(int)
    exercises: dict[str, str] = {}  # grade id -> exercise, in the order the verdicts list the cells
    mistakes: dict[str, dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
    unwritten: dict[str, list[str]] = defaultdict(list)
    unexplained: dict[str, list[str]] = defaultdict(list)
    visible_only: dict[str, dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
    for verdict in sorted(graded, key=lambda v: v.student):
        if verdict.failure is not None:
            found.failed[verdict.student] = verdict.failure
            continue
        found.scores[verdict.student] = (verdict.score, verdict.max_score)
        for grade_id, cell in verdict.cells.items():
            exercises.setdefault(grade_id, cell.exercise)
            seen[grade_id] += 1
            full = cell.points >= cell.max_points
            passed[grade_id] += full
            if not full and cell.unwritten:
                unwritten[grade_id].append(verdict.student)
            elif not full and not cell.mistakes:
                unexplained[grade_id].append(verdict.student)
            for mistake in cell.mistakes:
                mistakes[cell.exercise][mistake].add(verdict.student)
            if cell.visible is True and cell.hidden is False:
                visible_only[cell.exercise][verdict.student].append(grade_id)
    found.cells = [CellRate(g, exercise, passed[g], seen[g]) for g, exercise in exercises.items()]
    found.mistakes = {
        exercise: {mistake: sorted(students) for mistake, students in sorted(named.items())}
        for exercise, named in mistakes.items()
    }
    known = hints()
    found.hints = {
        (exercise, mistake): known.get((exercise, mistake), "")
        for exercise, named in found.mistakes.items()
        for mistake in named
    }
    found.unwritten, found.unexplained = dict(unwritten), dict(unexplained)
    found.visible_only = {exercise: dict(students) for exercise, students in visible_only.items()}
    found.manual = [score for score in manual or [] if score.student not in found.failed]
    return found


def _gradebook_url(workspace: Path, db_url: str | None) -> str | None:
    """The gradebook to read manual scores from: ``db_url``, else the workspace's SQLite file
    where there is one (None: no gradebook, so no manual scores; none is made)."""
    if db_url is not None:
        return db_url
    return sqlite_url(workspace) if (workspace / GRADEBOOK).is_file() else None


def manual_scores(db_url: str, graded: dict[tuple[str, str], Verdict]) -> dict[str, list[ManualScore]]:
    """lesson -> the cells scored by hand in nbgrader's gradebook at ``db_url``, of the submissions
    in ``graded`` ((lesson, student) -> its verdict), by learner and cell."""
    found: dict[str, list[ManualScore]] = defaultdict(list)
    with Gradebook(db_url, course_id=COURSE_ID) as gradebook:
        for grade in gradebook.db.query(Grade).filter(Grade.manual_score.isnot(None)):
            assignment = grade.notebook.assignment
            key = (assignment.assignment.name, assignment.student.id)
            if key not in graded:
                continue
            cell = graded[key].cells.get(grade.name)
            found[key[0]].append(
                ManualScore(
                    key[1],
                    grade.name,
                    cell.exercise if cell else "",
                    float(grade.manual_score),
                    float(grade.max_score),
                    None if grade.auto_score is None else float(grade.auto_score),
                )
            )
    return {lesson: sorted(scores, key=lambda m: (m.student, m.grade_id)) for lesson, scores in found.items()}


def read_class(workspace: Path, lesson: str | None = None, db_url: str | None = None) -> list[LessonInsights]:
    """The insights of every lesson that has verdicts in ``workspace`` (with ``lesson``, that one
    only), in the lessons' order, with the manual scores of the gradebook (``db_url``, else the
    workspace's own, if it has one)."""
    if lesson is not None and lesson not in lessons.LESSON_NAMES:
        raise ValueError(
            f"--lesson {lesson!r} is no lesson; expected one of {', '.join(lessons.LESSON_NAMES)}"
        )
    folder = workspace / verdicts.FOLDER
    files = sorted(folder.glob(f"{lesson or '*'}/*.json"))
    if not files:
        graded = sorted(path.name for path in folder.glob("*") if path.is_dir())
        which = f" of {lesson} (lessons with verdicts: {', '.join(graded) or 'none'})" if lesson else ""
        raise FileNotFoundError(
            f"no verdict files{which} in {folder}: grade the class first (python -m autograder autograde); "
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
    url = _gradebook_url(workspace, db_url)
    everyone = {(v.lesson, v.student): v for found in by_lesson.values() for v in found}
    manual = manual_scores(url, everyone) if url else {}
    return [of_lesson(name, by_lesson[name], manual.get(name)) for name in sorted(by_lesson)]


def _share(value: float, out_of: float) -> str:
    """value / out_of to four places, as text that keeps them (never negative: written as it is)."""
    return f"{value / out_of:.4f}" if out_of else ""


def _cell_rows(found: LessonInsights) -> list[dict[str, csv_files.Cell]]:
    """A test cell's pass rate, then its learners who did not attempt it and those whose failure
    no catalogued mistake names."""
    out: list[dict[str, csv_files.Cell]] = []
    for c in found.cells:
        out.append(
            {"exercise": c.exercise, "kind": "cell pass rate", "item": c.grade_id, "value": c.passed,
             "out_of": c.graded, "share": _share(c.passed, c.graded)}
        )  # fmt: skip
        for kind, students in (("not attempted", found.unwritten), ("no named mistake", found.unexplained)):
            who = students.get(c.grade_id, [])
            out.append(
                {"exercise": c.exercise, "kind": kind, "item": c.grade_id, "value": len(who),
                 "out_of": c.graded, "share": _share(len(who), c.graded), "students": "; ".join(who)}
            )  # fmt: skip
    return out


def rows(found: LessonInsights) -> list[dict[str, csv_files.Cell]]:
    """The CSV rows of one lesson (see the module's docstring for the columns)."""
    lesson, graded = found.lesson, found.graded
    out = _cell_rows(found)
    for exercise, mistake, count in found.mistake_counts():
        students = "; ".join(found.mistakes[exercise][mistake])
        out.append(
            {"exercise": exercise, "kind": "mistake", "item": mistake, "value": count,
             "out_of": graded, "share": _share(count, graded), "students": students,
             "hint": found.hints.get((exercise, mistake), "")}
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
    for m in found.manual:
        auto = "no autograded score" if m.auto is None else f"autograded {m.auto:g}"
        out.append(
            {"exercise": m.exercise, "kind": "manual score", "item": m.student, "value": m.score,
             "out_of": m.max_score, "share": _share(m.score, m.max_score), "note": f"{m.grade_id} ({auto})"}
        )  # fmt: skip
    for student, why in found.failed.items():
        out.append({"kind": "failed grading", "item": student, "note": why})
    return [{column: row.get(column, "") for column in COLUMNS} | {"lesson": lesson} for row in out]


def write_table(found: list[LessonInsights], target: Path) -> Path:
    """insights.csv: the header, then every lesson's rows (autograder/engine/csv_files.py writes
    no text cell a spreadsheet would run)."""
    table = [[row[column] for column in COLUMNS] for lesson in found for row in rows(lesson)]
    return csv_files.write(target, [COLUMNS, *table])


def insights(
    workspace: Path, out: Path | None = None, lesson: str | None = None, db_url: str | None = None
) -> Path:
    """Write the class insights of ``workspace`` into ``out`` (default: <workspace>/insights/, or
    <workspace>/insights/<lesson>/ for one ``lesson``): an offline page, index.html, and
    insights.csv beside it; manual scores come from the gradebook at ``db_url`` (default: the
    workspace's own). Returns the page's path."""
    found = read_class(workspace, lesson, db_url)
    folder = out or (workspace / FOLDER / lesson if lesson else workspace / FOLDER)
    folder.mkdir(parents=True, exist_ok=True)
    write_table(found, folder / TABLE)
    page = folder / PAGE
    page.write_text(insights_page.page(found, csv_name=TABLE), encoding="utf-8")
    return page
