"""A grading that did not finish is never a number (issue 36).

The sandbox is broken on purpose, as on a machine whose environment imports the course from a
folder the sandbox does not show the kernels: the checkout is emptied inside the sandbox (its
virtual environment bound back), so the zygote's ``import autograder`` fails and every grading
stops before a cell runs. ``autograde`` must then exit non-zero with a one-line banner,
grades.csv must leave the score cells empty and say why, and the LMS exports must leave the
submissions out, with a line each.
"""

import csv
import shutil
import sys
from importlib.machinery import ModuleSpec
from pathlib import Path

import pytest

from autograder.__main__ import GRADER_FAILED, SAMPLE_COURSE, SAMPLES, grader_failures, main
from autograder.engine.kernels import sandbox, zygote
from autograder.engine.pipeline import Pipeline
from autograder.engine.submission import Graded
from autograder.instructor import grades
from autograder.instructor.lms import read_roster
from autograder.lessons import ROOT

LESSON = "01_embedding"
STUDENTS = ("ada", "ben")
# limits of their own: the zygote started here is not one another test of this process started
BROKEN_LIMITS = ["--open-files", "1000"]


@pytest.fixture(scope="module")
def broken(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """Two submissions autograded where the kernels cannot import the course, then exported."""
    root = tmp_path_factory.mktemp("failed")
    workspace = root / "workspace"
    inbox = root / "inbox"
    for student in STUDENTS:
        shutil.copytree(SAMPLES / student / LESSON, inbox / student / LESSON)
    shared = ["--workspace", str(workspace), *BROKEN_LIMITS]
    assert main([*shared, "release", LESSON]) == 0
    assert main([*shared, "collect", "--folder", str(inbox)]) == 0
    patch = pytest.MonkeyPatch()
    patch.setattr(zygote, "private_roots", lambda: [*sandbox.private_roots(), ROOT])
    patch.setattr(zygote, "needed", lambda: [folder for folder in sandbox.needed() if folder != ROOT])
    stderr = root / "stderr.txt"
    with stderr.open("w") as handle:
        real = sys.stderr
        sys.stderr = handle
        try:
            code = main([*shared, "autograde", "--jobs", "1"])  # in this process, where the patch holds
        finally:
            sys.stderr = real
            patch.undo()
    assert main([*shared, "export"]) == 0
    assert main([*shared, "export", "--canvas", str(SAMPLE_COURSE / "roster.csv")]) == 0
    assert main([*shared, "export", "--moodle", str(SAMPLE_COURSE / "roster.csv")]) == 0
    return {"code": code, "stderr": stderr.read_text(), "workspace": workspace}


def _rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def test_autograde_exits_non_zero_with_a_one_line_banner(broken: dict) -> None:
    assert broken["code"] == GRADER_FAILED
    banner = [line for line in broken["stderr"].splitlines() if line.startswith("GRADING FAILED")]
    assert len(banner) == 1, broken["stderr"]
    assert "2 of 2 gradings did not finish for a reason of the grader's own" in banner[0]
    assert "(first: ZygoteError: the zygote" in banner[0]  # the reason: the zygote could not start


def test_grades_csv_has_empty_scores_and_says_why(broken: dict) -> None:
    rows = {(row["student"], row["lesson"]): row for row in _rows(broken["workspace"] / "grades.csv")}
    for student in STUDENTS:
        row = rows[student, LESSON]
        assert (row["score"], row["after_late"], row["days_late"]) == ("", "", "")
        assert row["status"].startswith("not graded: ")
        assert rows[student, "TOTAL"]["status"] == "incomplete: 1 not graded"


def test_lms_exports_leave_the_submissions_out(broken: dict) -> None:
    for name in ("canvas.csv", "moodle.csv"):
        rows = _rows(broken["workspace"] / name)
        assert all(row.get(LESSON) in (None, "") for row in rows if "Points Possible" not in str(row)), rows
    problems = [
        (row["student"], row["lesson"])
        for row in _rows(broken["workspace"] / "problems.csv")
        if row["problem"].startswith("grading did not finish, left out of the export")
    ]
    assert problems == [(student, LESSON) for student in STUDENTS]


def _graded(failure: str | None, grader_failed: bool) -> Graded:
    return Graded(LESSON, "ada", {}, [], failure=failure, grader_failed=grader_failed)


def test_only_the_graders_own_failures_fail_the_run(capsys: pytest.CaptureFixture) -> None:
    submissions_own = _graded("the kernel exited while running the solution cell of Embedding", False)
    assert grader_failures([submissions_own, _graded(None, False)]) == 0
    assert capsys.readouterr().err == ""
    graders_own = _graded("ZygoteError: the zygote failed: No module named 'autograder'", True)
    assert grader_failures([submissions_own, graders_own]) == GRADER_FAILED
    assert capsys.readouterr().err.count("\n") == 1


class _ElsewhereFinder:
    """An editable install's finder that answers ``import autograder`` from another checkout."""

    def find_spec(self, name: str, path: object, target: object = None) -> ModuleSpec | None:
        if name != "autograder":
            return None
        return ModuleSpec(name, None, origin="/srv/other-checkout/autograder/__init__.py")


def test_the_sandbox_binds_the_folder_the_course_is_imported_from(monkeypatch: pytest.MonkeyPatch) -> None:
    assert Path("/srv/other-checkout") not in sandbox.needed()
    monkeypatch.setattr(sys, "meta_path", [*sys.meta_path, _ElsewhereFinder()])
    assert Path("/srv/other-checkout") in sandbox.needed()
    assert ROOT in sandbox.needed()


def test_the_table_says_failed_and_which_scores_it_shows(broken: dict) -> None:
    table = grades.table(Pipeline(broken["workspace"], log=lambda *_: None))
    assert [line.split()[:2] for line in table.splitlines()[1:3]] == [["ada", "failed"], ["ben", "failed"]]
    assert "scores after late penalties" in table


def test_the_rosters_names_reach_the_gradebook(broken: dict) -> None:
    with Pipeline(broken["workspace"], log=lambda *_: None).gradebook() as gb:
        names = {student.id: (student.first_name, student.last_name) for student in gb.students}
    roster = {person.student: person.name for person in read_roster(SAMPLE_COURSE / "roster.csv").people}
    for student in STUDENTS:
        first, last = names[student]
        assert first and last and first in roster[student] and last in roster[student]
