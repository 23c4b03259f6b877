"""Hostile data in the fields this round added to the class insights and the LMS round trip.

Every attack is shown working against a stand-in without the defence before it is shown failing:

* a learner's name in Canvas's own gradebook export (now a roster as it is) reaches canvas.csv and
  moodle.csv as text, never as a formula a spreadsheet runs;
* a learner who names themselves as Canvas names its test student is not lost without a word:
  the export leaves them out, and the report says so;
* names in the insights' new columns (the learners who did not attempt a cell, those whose
  failure no mistake names, the cells scored by hand) are text on the page and in the CSV.
"""

import csv
import json
from html.parser import HTMLParser
from pathlib import Path

from autograder.engine import csv_files, verdicts
from autograder.instructor import grades, insights, insights_page, late, lms
from autograder.instructor.insights_data import ManualScore
from tests.helpers import FORMULAS, formulas

LESSON = "03_attention"
EXERCISE = "scaled_dot_product_attention"
CELL = f"test_{EXERCISE}_values"
MARKUP = '<img src=x onerror="alert(document.cookie)">'  # what a page would run, were it markup
HEADER = "Student,ID,SIS User ID,SIS Login ID,Section,03_attention (90103)\n    Points Possible,,,,,10\n"


def _plain_cell(value: csv_files.Cell) -> str:
    """The stand-in without the defence: what csv.writer writes of a value."""
    return "" if value is None else str(value)


def _canvas_export(tmp_path: Path, names: list[str]) -> Path:
    """Canvas's gradebook export with these learners' names, IDs 1000, 1001, ..."""
    path = tmp_path / "canvas-export.csv"
    with path.open("w", newline="", encoding="utf-8") as handle:
        handle.write(HEADER)
        csv.writer(handle).writerows([name, 1000 + n, "", "", "", ""] for n, name in enumerate(names))
    return path


def _graded(students: list[str]) -> dict[tuple[str, str], grades.Grade]:
    """4 of 10 in lesson 03 for each, no due date."""
    scores = {(student, LESSON): (4.0, 10.0) for student in students}
    return grades.apply_late(scores, dict.fromkeys(scores), late.Policy())


def test_names_in_canvass_export_reach_the_lms_files_as_text(tmp_path, monkeypatch):
    roster = lms.read_roster(_canvas_export(tmp_path, FORMULAS))
    graded = _graded([p.student for p in roster.people])
    canvas, moodle = tmp_path / "canvas.csv", tmp_path / "moodle.csv"
    people = [lms.Person(**{**vars(p), "email": f"{p.student}@uni.example"}) for p in roster.people]
    with_email = lms.Roster(roster.name, people)

    monkeypatch.setattr(csv_files, "cell", _plain_cell)  # the plain csv.writer: the attack works
    lms.canvas_csv(canvas, roster, graded, {})
    lms.moodle_csv(moodle, with_email, graded, "email")
    assert FORMULAS[0] in formulas(canvas) and FORMULAS[1] in formulas(moodle)
    monkeypatch.undo()

    lms.canvas_csv(canvas, roster, graded, {})
    lms.moodle_csv(moodle, with_email, graded, "email")
    assert formulas(canvas) == formulas(moodle) == []
    with canvas.open(newline="", encoding="utf-8") as handle:
        assert [row[0] for row in list(csv.reader(handle))[2:]] == ["'" + name.strip() for name in FORMULAS]


def test_a_learner_named_as_canvass_test_student_is_reported_not_lost(tmp_path, monkeypatch):
    """ID 1001 set their name to Canvas's test student's: the roster passes the row over, so
    their grade cannot go to Canvas; the roster report names them. Without it, nothing said."""
    roster = lms.read_roster(_canvas_export(tmp_path, ["Çetin, Ada", lms.CANVAS_TEST_STUDENT]))
    graded = _graded(["1000", "1001"])
    assert [p.student for p in roster.people] == ["1000"]

    monkeypatch.setattr(lms, "roster_report", lambda roster, graded: [])  # a stand-in without the report
    assert lms.canvas_csv(tmp_path / "canvas.csv", roster, graded, {}) == []
    monkeypatch.undo()

    [problem] = lms.canvas_csv(tmp_path / "canvas.csv", roster, graded, {})
    assert (problem.student, problem.lesson) == ("1001", LESSON)
    assert "not in the roster canvas-export.csv: left out of the export" in problem.what


class _Tags(HTMLParser):
    def __init__(self, page: str):
        super().__init__()
        self.images: list[str] = []
        self.feed(page)

    def handle_starttag(self, tag, attrs):
        if tag == "img":
            self.images.append(dict(attrs).get("src", ""))


def _hostile_class(workspace: Path) -> None:
    """Two verdicts whose learners' names are markup and a formula: one left the stub, one failed
    with no mistake named; and a cell one of them got by hand."""
    for number, (name, unwritten) in enumerate(((MARKUP, True), (FORMULAS[0], False))):
        cell = {"exercise": EXERCISE, "points": 0.0, "max_points": 2.0, "visible": False, "hidden": None,
                "mistakes": [], "unwritten": unwritten}  # fmt: skip
        verdict = {"lesson": LESSON, "student": name, "graded_at": "2026-12-01T10:00:00+00:00", "score": 0.0,
                   "max_score": 2.0, "failure": None, "cells": {CELL: cell}}  # fmt: skip
        path = verdicts.path(workspace, LESSON, f"learner{number}")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(verdict))


def _with_manual(monkeypatch) -> None:
    """The gradebook's manual scores, as read_class asks for them: one for each learner."""

    def manual(db_url, graded):
        return {
            LESSON: [ManualScore(student, CELL, EXERCISE, 1.0, 2.0, 0.0) for _, student in sorted(graded)]
        }

    monkeypatch.setattr(insights, "manual_scores", manual)
    monkeypatch.setattr(insights, "_gradebook_url", lambda workspace, db_url: "sqlite://")


def test_names_in_the_new_columns_are_text_on_the_page(tmp_path, monkeypatch):
    _hostile_class(tmp_path)
    _with_manual(monkeypatch)
    with monkeypatch.context() as patched:
        patched.setattr(insights_page, "_e", str)  # no escaping: the attack works
        exposed = _Tags(insights.insights(tmp_path, lesson=LESSON).read_text()).images
    assert exposed.count("x") == 2  # the learner who did not attempt the cell, and the manual score's

    page = insights.insights(tmp_path, lesson=LESSON).read_text()
    assert "x" not in _Tags(page).images
    assert page.count("&lt;img src=x onerror=&quot;alert(document.cookie)&quot;&gt;") == 2


def test_names_in_the_new_rows_are_no_formula_in_the_csv(tmp_path, monkeypatch):
    _hostile_class(tmp_path)
    _with_manual(monkeypatch)
    table = tmp_path / "insights" / LESSON / insights.TABLE
    with monkeypatch.context() as patched:
        patched.setattr(csv_files, "cell", _plain_cell)  # the plain csv.writer: the attack works
        insights.insights(tmp_path, lesson=LESSON)
    assert FORMULAS[0] in formulas(table)

    insights.insights(tmp_path, lesson=LESSON)
    assert formulas(table) == []
    with table.open(newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    kinds = {(row["kind"], row["students"] or row["item"]) for row in rows if row["kind"] != "cell pass rate"}
    assert ("no named mistake", "'" + FORMULAS[0]) in kinds and ("manual score", "'" + FORMULAS[0]) in kinds
