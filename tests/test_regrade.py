"""Regrading one student changes that student's grades only, records what changed, and loses nothing."""

import csv
import shutil
import zipfile
from datetime import UTC, datetime
from pathlib import Path

import pytest
from nbgrader.apps import NbGraderAPI

from autograder.__main__ import main
from autograder.engine import intake_time, verdicts
from autograder.engine.nbgrader_patches import PATCHED, apply_course_patches
from autograder.engine.pipeline import Pipeline
from autograder.engine.regrade import regrade
from autograder.instructor import grades

SAMPLES = Path(__file__).resolve().parent.parent / "autograder" / "sample_submissions"
LESSON = "03_attention"
NOTEBOOK = "attention.ipynb"


@pytest.fixture(scope="module")
def graded(tmp_path_factory) -> tuple[Pipeline, Path]:
    """ada (right) and ben (a catalogued mistake) graded on lesson 03."""
    root = tmp_path_factory.mktemp("regrade")
    inbox = root / "inbox"
    for student in ("ada", "ben"):
        shutil.copytree(SAMPLES / student / LESSON, inbox / student / LESSON)
    pipeline = Pipeline(root / "workspace", log=lambda line: None)
    pipeline.release([LESSON])
    pipeline.collect_folder(inbox)
    pipeline.autograde()
    return pipeline, root


def _gradebook(pipeline: Pipeline, student: str) -> tuple[float, str]:
    with pipeline.gradebook() as gb:
        submission = gb.find_submission(LESSON, student)
        return submission.score, submission.id


def test_a_resubmission_regrades_its_student_only_and_records_the_change(graded):
    pipeline, root = graded
    ada_before = _gradebook(pipeline, "ada")
    ada_verdict = verdicts.path(pipeline.workspace, LESSON, "ada").read_bytes()
    ben_original = (pipeline.submitted / "ben" / LESSON / NOTEBOOK).read_bytes()
    assert _gradebook(pipeline, "ben")[0] < ada_before[0]  # ben's mistake costs points

    fixed = root / "resubmitted"
    (fixed / "ben" / LESSON).mkdir(parents=True)
    shutil.copy(SAMPLES / "ada" / LESSON / NOTEBOOK, fixed / "ben" / LESSON / NOTEBOOK)
    changes = regrade(pipeline, "ben", LESSON, folder=fixed, feedback=grades.feedback)

    assert [(c.student, c.lesson, c.after) for c in changes] == [("ben", LESSON, ada_before[0])]
    assert changes[0].before is not None and changes[0].before < changes[0].after
    assert changes[0].cells and all(new > (old or 0) for old, new in changes[0].cells.values())
    assert _gradebook(pipeline, "ben")[0] == ada_before[0]
    # nobody else's grade moved: the same gradebook row, the same verdict file, byte for byte
    assert _gradebook(pipeline, "ada") == ada_before
    assert verdicts.path(pipeline.workspace, LESSON, "ada").read_bytes() == ada_verdict
    # the former submission is kept, and the log says what changed
    kept = list((pipeline.workspace / "replaced" / "ben" / LESSON).glob(f"*/{NOTEBOOK}"))
    assert [path.read_bytes() for path in kept] == [ben_original]
    with (pipeline.workspace / "regrades.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    assert rows[-1]["student"] == "ben" and rows[-1]["after"] == f"{ada_before[0]:g}"
    assert all(cell in rows[-1]["cells_changed"] for cell in changes[0].cells)


def test_a_corrupt_resubmission_leaves_the_former_submission_in_place(graded):
    pipeline, root = graded
    before = (pipeline.submitted / "ben" / LESSON / NOTEBOOK).read_bytes()
    broken = root / "broken"
    (broken / "ben" / LESSON).mkdir(parents=True)
    (broken / "ben" / LESSON / NOTEBOOK).write_text("{ not a notebook")
    regrade(pipeline, "ben", LESSON, folder=broken, feedback=grades.feedback)
    assert (pipeline.submitted / "ben" / LESSON / NOTEBOOK).read_bytes() == before
    assert any("not a valid notebook" in p.what for p in pipeline.problems if p.student == "ben")


def test_a_regrade_without_a_source_regrades_what_was_taken_in(graded):
    pipeline, _ = graded
    score = _gradebook(pipeline, "ada")[0]
    changes = regrade(pipeline, "ada", LESSON, feedback=grades.feedback)
    assert [(c.before, c.after, c.cells) for c in changes] == [(score, score, {})]


def test_a_student_with_nothing_to_regrade_is_told_so(graded):
    pipeline, root = graded
    with pytest.raises(ValueError, match="no notebooks of 'zed'"):
        regrade(pipeline, "zed", LESSON, folder=root / "inbox", feedback=grades.feedback)
    with pytest.raises(ValueError, match="nothing of 'zed' to regrade"):
        regrade(pipeline, "zed", feedback=grades.feedback)


def test_a_regrade_from_an_lms_zip_takes_that_students_attempt_only(graded):
    pipeline, root = graded
    ada_verdict = verdicts.path(pipeline.workspace, LESSON, "ada").read_bytes()
    archive = root / "download.zip"
    fixed = (SAMPLES / "ada" / LESSON / NOTEBOOK).read_bytes()
    with zipfile.ZipFile(archive, "w") as bundle:
        for user in ("ada", "ben"):  # ada's attempt holds something else: it must stay out
            attempt = f"{LESSON}_{user}_attempt_2026-11-20-10-00-00"
            bundle.writestr(f"{attempt}.txt", f"Name: {user.title()} ({user})\n")
            bundle.writestr(f"{attempt}_{NOTEBOOK}", fixed if user == "ben" else "{ not a notebook")
    changes = regrade(pipeline, "ben", LESSON, archive=archive, feedback=grades.feedback)
    assert [(c.student, c.source) for c in changes] == [("ben", str(archive))]
    assert (pipeline.submitted / "ben" / LESSON / NOTEBOOK).read_bytes() == fixed
    assert verdicts.path(pipeline.workspace, LESSON, "ada").read_bytes() == ada_verdict
    assert not [p for p in pipeline.problems if p.student == "ada"]


def test_a_regrade_from_a_folder_keeps_the_recorded_hand_in_time(graded):
    pipeline, root = graded
    folder = pipeline.submitted / "ben" / LESSON
    recorded = intake_time.Handed(datetime(2026, 11, 20, 10, 0, tzinfo=UTC), "LMS file name")
    intake_time.record(folder, recorded)
    copy = root / "copied"
    shutil.copytree(SAMPLES / "ben" / LESSON, copy / "ben" / LESSON)  # file times: now, the copy's
    known = len(pipeline.problems)
    regrade(pipeline, "ben", LESSON, folder=copy, feedback=grades.feedback)
    assert intake_time.read(folder) == recorded
    assert not [p for p in pipeline.problems[known:] if "hand-in time changed" in p.what]


def test_a_regrade_from_an_lms_zip_takes_its_time_and_says_so(graded):
    pipeline, root = graded
    folder = pipeline.submitted / "ben" / LESSON
    intake_time.record(folder, intake_time.Handed(datetime(2026, 11, 20, 10, 0, tzinfo=UTC), "LMS file name"))
    archive = root / "later.zip"
    with zipfile.ZipFile(archive, "w") as bundle:
        attempt = f"{LESSON}_ben_attempt_2026-11-22-09-30-00"
        bundle.writestr(f"{attempt}_{NOTEBOOK}", (SAMPLES / "ben" / LESSON / NOTEBOOK).read_bytes())
    regrade(pipeline, "ben", LESSON, archive=archive, feedback=grades.feedback)
    handed = intake_time.read(folder)
    assert (handed.source, handed.at.day, handed.at.hour) == ("LMS file name", 22, 9)
    said = [p.what for p in pipeline.problems if p.student == "ben" and "hand-in time changed" in p.what]
    assert said and "2026-11-20" in said[-1] and "2026-11-22" in said[-1]


def test_a_regrade_rewrites_that_students_feedback_pages_only(graded):
    pipeline, root = graded
    grades.feedback(pipeline)
    pages = {
        student: next((pipeline.workspace / "feedback" / student / LESSON).glob("*.html"))
        for student in ("ada", "ben")
    }
    before = {student: page.stat().st_mtime_ns for student, page in pages.items()}
    regrade(pipeline, "ben", LESSON, feedback=grades.feedback)
    assert pages["ada"].stat().st_mtime_ns == before["ada"]
    assert pages["ben"].stat().st_mtime_ns > before["ben"]


def test_a_broken_zip_is_a_one_line_error_and_keeps_the_submission(graded, capsys):
    pipeline, root = graded
    before = (pipeline.submitted / "ben" / LESSON / NOTEBOOK).read_bytes()
    broken = root / "broken.zip"
    broken.write_bytes(b"PK\x03\x04 not really a zip")
    with pytest.raises(ValueError, match="not a zip file; expected the LMS's download"):
        regrade(pipeline, "ben", LESSON, archive=broken, feedback=grades.feedback)
    assert (pipeline.submitted / "ben" / LESSON / NOTEBOOK).read_bytes() == before
    workspace = ["--workspace", str(pipeline.workspace)]
    assert main([*workspace, "regrade", "ben", "--lesson", LESSON, "--zip", str(broken)]) == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and error.startswith("error: ") and "Traceback" not in error


def test_a_regrade_after_the_formgraders_button_starts_from_the_buttons_score(graded, monkeypatch):
    """The Formgrader's Autograde button records its verdict, so a later regrade's "before" is the
    score the button gave (before it recorded one, the regrade logged none, or an older one)."""
    pipeline, _ = graded
    pipeline.take("dee", LESSON, SAMPLES / "ben" / LESSON / NOTEBOOK)
    for owner, name in PATCHED:  # put back after the test, as nbgrader had them
        monkeypatch.setattr(owner, name, getattr(owner, name))
    apply_course_patches(pipeline.setup)  # what the workspace's configuration file does in the Formgrader
    assert NbGraderAPI(config=pipeline.setup.config()).autograde(LESSON, "dee")["success"]
    button = _gradebook(pipeline, "dee")[0]
    assert button < _gradebook(pipeline, "ada")[0]  # ben's mistake, handed in by dee
    (change,) = regrade(pipeline, "dee", LESSON, feedback=grades.feedback)
    assert (change.before, change.after, change.cells) == (button, button, {})
