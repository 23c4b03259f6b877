"""Hostile hand-ins at the intake: an upload named to be credited to another student, and a
hand-in time that only the learner's own files claim.

Each attack is shown succeeding against a stand-in without its defence (the intake's former
name-based reading, or the time check switched off), then failing against the intake as it is.
"""

import re
import zipfile
from datetime import UTC, datetime, timedelta
from pathlib import Path

import nbformat
import pytest

from autograder import lessons
from autograder.engine import intake, intake_time
from autograder.engine import workspace as layout
from autograder.engine.pipeline import Pipeline
from autograder.engine.regrade import regrade
from autograder.instructor import grades, late

LESSON = "03_attention"
NOTEBOOK = lessons.notebook_name(LESSON)
ATTEMPT_TIME = "2026-11-20-10-00-00"
# What ben uploads besides his own notebook: Blackboard names it
# 03_attention_ben_attempt_<time>_<this>, and a reading by names finds another student in it.
FORGED_FOR = "x_{victim}_attempt_2026-11-20-10-00-00_attention.ipynb"
COURSE = """timezone = "Europe/Berlin"

[due]
03_attention = "2026-11-20 23:59"

[penalty]
per_day = 10
"""

# The intake before this defence read the student from the file's base name, the learner's part
# included: Blackboard's name first, then <student>_<notebook>.
NAME_BASED = [
    re.compile(r"^.+?_(?P<student>[A-Za-z0-9.\-]+)_attempt_[0-9\-]+_(?P<notebook>[A-Za-z0-9_]+\.ipynb)$"),
    re.compile(r"^(?P<student>[A-Za-z0-9.\-]+)_(?P<notebook>[A-Za-z0-9_]+\.ipynb)$"),
]


def name_based_reading(bundle: zipfile.ZipFile, lesson: str) -> tuple[list[intake.Entry], list]:
    """A stand-in for intake.read_download without the defence: the former rule."""
    entries = []
    for member in bundle.infolist():
        base = Path(member.filename).name
        match = next(filter(None, (pattern.match(base) for pattern in NAME_BASED)), None)
        if match is not None:
            time = re.search(r"_attempt_([0-9\-]+)_", base)
            entries.append(
                intake.Entry(member.filename, match["student"], match["notebook"], time and time[1])
            )
    return entries, []


def _notebook(who: str) -> str:
    """The lesson's notebook, marked in its metadata with who wrote it."""
    nb = nbformat.read(lessons.course_path(LESSON), as_version=4)
    nb.metadata["written_by"] = who
    return nbformat.writes(nb)


def _written_by(pipeline: Pipeline, student: str) -> str | None:
    path = pipeline.submitted / student / LESSON / NOTEBOOK
    return nbformat.read(path, as_version=4).metadata["written_by"] if path.is_file() else None


def _blackboard(folder: Path, attempts: dict[str, list[tuple[str, str]]], when: str = ATTEMPT_TIME) -> Path:
    """A Blackboard download: per user name, the files of the attempt (the learner's file name,
    its content) and the attempt's record."""
    archive = folder / "download.zip"
    with zipfile.ZipFile(archive, "w") as bundle:
        for user, files in attempts.items():
            attempt = f"{LESSON}_{user}_attempt_{when}"
            bundle.writestr(f"{attempt}.txt", f"Name: {user.title()} ({user})\nAssignment: {LESSON}\n")
            for name, text in files:
                bundle.writestr(f"{attempt}_{name}", text)
    return archive


def _pipeline(root: Path) -> Pipeline:
    return Pipeline(root / "workspace", release=root / "release", log=lambda *_: None)


def test_a_file_in_bens_attempt_is_never_chos_submission(tmp_path, monkeypatch):
    archive = _blackboard(
        tmp_path,
        {
            "ada": [(NOTEBOOK, _notebook("ada"))],
            "ben": [(NOTEBOOK, _notebook("ben")), (FORGED_FOR.format(victim="cho"), _notebook("ben"))],
        },
    )
    # without the defence: cho, who handed in nothing, has a submission, and nothing is reported
    with monkeypatch.context() as patched:
        patched.setattr(intake, "read_download", name_based_reading)
        exposed = _pipeline(tmp_path / "exposed")
        exposed.collect_zip(archive, LESSON)
    assert _written_by(exposed, "cho") == "ben" and exposed.problems == []

    defended = _pipeline(tmp_path / "defended")
    defended.collect_zip(archive, LESSON)
    assert [key.student for key in defended.submissions()] == ["ada", "ben"]
    assert (_written_by(defended, "ada"), _written_by(defended, "ben")) == ("ada", "ben")
    [problem] = defended.problems
    assert problem.student == "ben"
    assert problem.what.endswith("a file in ben's attempt named as cho's hand-in; refused")


def test_regrade_ada_from_a_zip_takes_only_adas_attempt(tmp_path, monkeypatch):
    """ben's attempt holds a file named as ada's; `regrade ada --zip` must not take it."""
    archive = _blackboard(tmp_path, {"ben": [(FORGED_FOR.format(victim="ada"), _notebook("ben"))]})
    monkeypatch.setattr(Pipeline, "autograde", lambda self, **_: [])  # what is taken in is the point
    inbox = tmp_path / "inbox" / "ada" / LESSON
    inbox.mkdir(parents=True)
    (inbox / NOTEBOOK).write_text(_notebook("ada"))

    with monkeypatch.context() as patched:
        patched.setattr(intake, "read_download", name_based_reading)
        exposed = _pipeline(tmp_path / "exposed")
        exposed.collect_folder(tmp_path / "inbox")
        regrade(exposed, "ada", LESSON, archive=archive, feedback=grades.feedback)
    assert _written_by(exposed, "ada") == "ben"  # ada's grade would be ben's work's

    defended = _pipeline(tmp_path / "defended")
    defended.collect_folder(tmp_path / "inbox")
    with pytest.raises(ValueError, match="no notebook of 'ada'"):
        regrade(defended, "ada", LESSON, archive=archive, feedback=grades.feedback)
    assert _written_by(defended, "ada") == "ada"  # put back as it was


def _late_resubmission(root: Path, claimed: datetime) -> Path:
    """ben's folder from an exchange: a new notebook, and a timestamp.txt of his own."""
    folder = root / "late" / "ben" / LESSON
    folder.mkdir(parents=True)
    (folder / NOTEBOOK).write_text(_notebook("ben, later"))
    (folder / "timestamp.txt").write_text(claimed.strftime(intake_time.NBGRADER_FORMAT) + "\n")
    return root / "late"


def _taken_from_the_lms(root: Path, archive: Path) -> Pipeline:
    pipeline = _pipeline(root)
    pipeline.workspace.mkdir(parents=True, exist_ok=True)
    (pipeline.workspace / layout.COURSE_FILE).write_text(COURSE)
    pipeline.collect_zip(archive, LESSON)
    return pipeline


def test_a_forged_timestamp_on_a_late_resubmission_is_flagged(tmp_path, monkeypatch):
    """ben's attempt was taken from the LMS (on time); after the due date he hands in a new
    notebook with a timestamp.txt claiming a time before it."""
    archive = _blackboard(tmp_path, {"ben": [(NOTEBOOK, _notebook("ben"))]})
    claimed = datetime(2026, 11, 20, 11, 0, tzinfo=UTC)  # before the due date, after the LMS's time
    late_folder = _late_resubmission(tmp_path, claimed)

    with monkeypatch.context() as patched:
        patched.setattr(intake_time, "contradiction", lambda earlier, now: None)
        exposed = _taken_from_the_lms(tmp_path / "exposed", archive)
        exposed.collect_folder(late_folder)
    handed = intake_time.read(exposed.submitted / "ben" / LESSON)
    assert handed.at == claimed and exposed.problems == []
    assert late.assess(late.load(exposed.workspace), "ben", LESSON, handed, 6).days == 0  # on time

    defended = _taken_from_the_lms(tmp_path / "defended", archive)
    defended.collect_folder(late_folder)
    [problem] = defended.problems
    assert problem.student == "ben"
    assert problem.what.startswith(
        "hand-in time 2026-11-20 11:00 UTC comes only from the learner's own timestamp.txt, but at "
    )
    assert problem.what.endswith(
        "the intake took in another notebook of this student's lesson, so this "
        "one was handed in later; check it"
    )
    # and the feedback says whose claim the time is
    said = late.assess(
        late.load(defended.workspace), "ben", LESSON, intake_time.read(defended.submitted / "ben" / LESSON), 6
    ).statement
    assert "the learner's own claim" in said


def test_a_timestamp_that_contradicts_the_lms_for_the_same_notebook_is_flagged(tmp_path, monkeypatch):
    """ben handed in late on the LMS; the same notebook comes again from a folder, with a
    timestamp.txt claiming a time before the due date."""
    text = _notebook("ben")
    archive = _blackboard(tmp_path, {"ben": [(NOTEBOOK, text)]}, when="2026-11-21-10-00-00")  # 1 day late
    folder = _late_resubmission(tmp_path, datetime(2026, 11, 20, 20, 0, tzinfo=UTC))
    (folder / "ben" / LESSON / NOTEBOOK).write_text(text)  # the very notebook the LMS holds

    with monkeypatch.context() as patched:
        patched.setattr(intake_time, "contradiction", lambda earlier, now: None)
        exposed = _taken_from_the_lms(tmp_path / "exposed", archive)
        exposed.collect_folder(folder)
    handed = intake_time.read(exposed.submitted / "ben" / LESSON)
    assert late.assess(late.load(exposed.workspace), "ben", LESSON, handed, 6).days == 0
    assert exposed.problems == []

    defended = _taken_from_the_lms(tmp_path / "defended", archive)
    defended.collect_folder(folder)
    [problem] = defended.problems
    assert problem.what == (
        "hand-in time 2026-11-20 20:00 UTC comes only from the learner's own timestamp.txt, and the "
        "LMS's time for the same notebook is 2026-11-21 09:00 UTC; check it"
    )


def test_an_honest_resubmission_and_a_second_collect_are_not_flagged(tmp_path):
    archive = _blackboard(tmp_path, {"ben": [(NOTEBOOK, _notebook("ben"))]})
    pipeline = _taken_from_the_lms(tmp_path, archive)
    later = datetime.now(UTC) + timedelta(minutes=1)  # handed in after the intake's first look
    folder = _late_resubmission(tmp_path, later)
    pipeline.collect_folder(folder)
    pipeline.collect_folder(folder)  # the same notebook and claim again
    assert pipeline.problems == []
