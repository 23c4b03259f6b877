"""Late work: hand-in times from each witness the intake has, lateness around the due date, across
time zones and clock changes, the penalty and its cap, extensions, and course.toml's mistakes."""

import os
import zipfile
from datetime import UTC, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest
from nbgrader.coursedir import CourseDirectory

from autograder.engine import durations, intake_time
from autograder.engine.intake import BLACKBOARD
from autograder.engine.intake_time import Handed
from autograder.engine.workspace import Key
from autograder.instructor import late

BERLIN = ZoneInfo("Europe/Berlin")
DUE = datetime(2026, 12, 4, 23, 59, tzinfo=BERLIN)  # 22:59 UTC: Berlin is UTC+1 in December
POLICY = late.Policy(
    BERLIN, {"01_embedding": DUE}, {Key("cho", "01_embedding"): DUE + timedelta(days=3)}, 10, 50
)


def handed(at: datetime, source: str = "LMS file name") -> Handed:
    return Handed(at, source)


@pytest.mark.parametrize(
    "after, days",
    [
        (timedelta(seconds=-1), 0),
        (timedelta(0), 0),  # at the due date to the second: on time
        (timedelta(seconds=1), 1),
        (timedelta(hours=24), 1),
        (timedelta(hours=24, seconds=1), 2),
        (timedelta(days=30), 30),
    ],
)
def test_every_started_day_after_the_due_date_counts(after, days):
    assert late.lateness(DUE + after, DUE) == days


@pytest.mark.parametrize("days, percent", [(0, 0), (1, 10), (5, 50), (6, 50), (400, 50)])
def test_the_penalty_grows_per_day_up_to_the_cap(days, percent):
    assert late.penalty(days, POLICY) == percent


def test_a_time_recorded_in_another_zone_is_the_same_moment():
    on_time_utc = datetime(2026, 12, 4, 22, 59, tzinfo=UTC)
    assert late.lateness(on_time_utc, DUE) == 0
    assert late.lateness(on_time_utc + timedelta(seconds=1), DUE) == 1
    new_york = datetime(2026, 12, 4, 17, 59, tzinfo=ZoneInfo("America/New_York"))  # 22:59 UTC
    assert late.lateness(new_york, DUE) == 0
    tokyo = datetime(2026, 12, 5, 8, 0, tzinfo=ZoneInfo("Asia/Tokyo"))  # 23:00 UTC
    assert late.lateness(tokyo, DUE) == 1


def test_days_are_elapsed_hours_across_the_clock_changes():
    """Both times in the same zone: Python would subtract wall clocks, an hour off on those nights."""
    spring_due = datetime(2026, 3, 28, 23, 59, tzinfo=BERLIN)  # the clocks skip 02:00-03:00 on 29 March
    next_wall_day = datetime(2026, 3, 30, 0, 59, tzinfo=BERLIN)  # 25 h on the wall, 24 h elapsed
    assert next_wall_day - spring_due == timedelta(hours=25)  # the trap
    assert late.lateness(next_wall_day, spring_due) == 1
    assert late.lateness(next_wall_day + timedelta(minutes=1), spring_due) == 2
    autumn_due = datetime(2026, 10, 24, 23, 59, tzinfo=BERLIN)  # 03:00 is 02:00 again on 25 October
    same_wall_time = datetime(2026, 10, 25, 23, 59, tzinfo=BERLIN)  # 24 h on the wall, 25 h elapsed
    assert late.lateness(same_wall_time, autumn_due) == 2
    assert late.lateness(datetime(2026, 10, 25, 22, 59, tzinfo=BERLIN), autumn_due) == 1


def test_the_statement_says_when_how_late_and_what_it_cost():
    outcome = late.assess(
        POLICY, "ada", "01_embedding", handed(datetime(2026, 12, 5, 10, 30, tzinfo=BERLIN)), 6
    )
    assert (outcome.days, outcome.percent, outcome.score) == (1, 10, 5.4)
    assert outcome.statement == (
        "Handed in 2026-12-05 10:30 (Europe/Berlin; time taken from the LMS's file name), "
        "10 h 31 min after the due date 2026-12-04 23:59, counted as 1 day late; "
        "10% of the points deducted: 6 -> 5.4."
    )


def test_lateness_known_only_from_the_files_time_is_stated_and_never_deducted():
    at = datetime(2026, 12, 5, 10, 30, tzinfo=BERLIN)
    witnessed = late.assess(POLICY, "ada", "01_embedding", handed(at, "timestamp.txt"), 6)
    unproven = late.assess(POLICY, "ada", "01_embedding", handed(at, "folder time"), 6)
    assert (witnessed.days, witnessed.score) == (1, 5.4)  # a witness of the hand-in costs points
    assert (unproven.days, unproven.percent, unproven.score) == (1, 0.0, 6)  # the files' time does not
    assert "no points are deducted" in unproven.statement and "instructor will check" in unproven.statement


def test_a_submission_at_the_due_date_is_on_time_and_says_so():
    at_due = handed(DUE.astimezone(UTC), "timestamp.txt")
    outcome = late.assess(POLICY, "ada", "01_embedding", at_due, 6)
    assert (outcome.days, outcome.score) == (0, 6)
    assert outcome.statement == (
        "Handed in 2026-12-04 23:59 (Europe/Berlin; time taken from the timestamp.txt handed in with "
        "the work, the learner's own claim), on time for the due date 2026-12-04 23:59."
    )


def test_one_second_late_shows_the_seconds():
    outcome = late.assess(POLICY, "ada", "01_embedding", handed(DUE + timedelta(seconds=1)), 10)
    assert outcome.score == 9
    assert "2026-12-04 23:59:01" in outcome.statement and "1 s after" in outcome.statement


def test_far_beyond_the_cap_deducts_the_cap():
    outcome = late.assess(POLICY, "ada", "01_embedding", handed(DUE + timedelta(days=90)), 8)
    assert (outcome.days, outcome.percent, outcome.score) == (90, 50, 4)
    assert "the most this course deducts" in outcome.statement


def test_an_extension_moves_the_due_date_for_that_student_only():
    two_days_late = handed(DUE + timedelta(days=2))
    cho = late.assess(POLICY, "cho", "01_embedding", two_days_late, 6)
    assert (cho.days, cho.score) == (0, 6)
    assert "2026-12-07 23:59 (extended for you)" in cho.statement
    assert late.assess(POLICY, "ada", "01_embedding", two_days_late, 6).score == 4.8
    cho_late = late.assess(POLICY, "cho", "01_embedding", handed(DUE + timedelta(days=3, seconds=1)), 6)
    assert (cho_late.days, cho_late.score) == (1, 5.4)


def test_no_due_date_no_statement_and_no_penalty_policy_deducts_nothing():
    assert late.assess(POLICY, "ada", "03_attention", handed(DUE + timedelta(days=9)), 6) == late.Late(
        0, 0, 6, None
    )
    lenient = late.Policy(BERLIN, {"01_embedding": DUE})
    outcome = late.assess(lenient, "ada", "01_embedding", handed(DUE + timedelta(days=2)), 6)
    assert (outcome.days, outcome.score) == (2, 6)
    assert outcome.statement.endswith(
        "counted as 2 days late; no points are deducted for late work in this course."
    )


def write(folder: Path, course: str, extensions: str | None = None) -> Path:
    (folder / "course.toml").write_text(course, encoding="utf-8")
    if extensions is not None:
        (folder / "extensions.csv").write_text(extensions, encoding="utf-8")
    return folder


def test_course_toml_and_extensions_are_read(tmp_path):
    course = """
timezone = "Europe/Berlin"
[due]
01_embedding = "2026-12-04 23:59"
02_positional_encoding = "2026-12-11 23:59:59+00:00"
03_attention = 2026-12-18T23:59:00
[penalty]
per_day = 10
cap = 50
"""
    policy = late.load(
        write(tmp_path, course, "\ufeffstudent,lesson,due\ncho,01_embedding,2026-12-07 23:59\n")
    )
    assert policy.due["01_embedding"] == DUE
    assert policy.due["02_positional_encoding"] == datetime(2026, 12, 11, 23, 59, 59, tzinfo=UTC)
    assert policy.due["03_attention"] == datetime(2026, 12, 18, 23, 59, tzinfo=BERLIN)
    assert (policy.per_day, policy.cap) == (10, 50)
    assert policy.due_for("cho", "01_embedding") == (datetime(2026, 12, 7, 23, 59, tzinfo=BERLIN), True)
    assert late.load(write(tmp_path, '[penalty]\npolicy = "none"\n')).per_day == 0
    assert late.load(tmp_path / "nowhere") == late.Policy()


@pytest.mark.parametrize(
    "course, said",
    [
        ('timezone = "Europe/Berlni"', ["course.toml", "timezone", "'Europe/Berlni'", "IANA"]),
        ('[due]\n03_atention = "2026-12-04 23:59"', ["[due]", "'03_atention'", "expected one of"]),
        ('[due]\n01_embedding = "4.12.2026"', ["[due] 01_embedding", "'4.12.2026'", "2026-12-04 23:59"]),
        ("[due]\n01_embedding = 2026-12-04", ["[due] 01_embedding", "a date without a time"]),
        (
            'timezone = "Europe/Berlin"\n[due]\n01_embedding = "2026-03-29 02:30"',
            ["does not exist in Europe/Berlin"],
        ),
        ("[penalty]\nper_day = 150", ["[penalty] per_day = 150", "percentage from 0 to 100"]),
        ("[penalty]\nper-day = 10", ["[penalty] unknown key(s) per-day"]),
        ('[penalty]\npolicy = "none"\nper_day = 10', ['policy = "none" alone']),
        ("deadline = 3", ["unknown key(s) deadline"]),
        ("[due\n", ["not valid TOML"]),
    ],
)
def test_a_mistake_in_course_toml_names_the_file_the_key_and_what_was_expected(tmp_path, course, said):
    with pytest.raises(late.CourseFileError) as error:
        late.load(write(tmp_path, course))
    for part in said:
        assert part in str(error.value)


@pytest.mark.parametrize(
    "extensions, said",
    [
        ("name,lesson,date\n", ["extensions.csv", "line 1", "student,lesson,due"]),
        ("student,lesson,due\n../x,01_embedding,2026-12-07 23:59\n", ["line 2", "not a student id"]),
        ("student,lesson,due\ncho,01_embedding,next week\n", ["line 2: due", "'next week'"]),
        (
            "student,lesson,due\ncho,01_embedding,2026-12-07 23:59\ncho,01_embedding,2026-12-08 23:59\n",
            ["line 3", "a second extension for cho"],
        ),
    ],
)
def test_a_mistake_in_extensions_names_the_line(tmp_path, extensions, said):
    with pytest.raises(late.CourseFileError) as error:
        late.load(write(tmp_path, 'timezone = "UTC"', extensions))
    for part in said:
        assert part in str(error.value)


# Hand-in times, from each witness


def zip_entry(name: str, when: tuple) -> tuple[zipfile.ZipInfo, str | None]:
    """A download's entry, and the attempt time in Blackboard's part of its name (None: none)."""
    match = BLACKBOARD.fullmatch(name)
    return zipfile.ZipInfo(name, date_time=when), match["time"] if match else None


def test_a_blackboard_name_gives_the_attempt_time_in_the_course_zone():
    info, attempt = zip_entry(
        "03_attention_ada_attempt_2026-12-05-10-30-00_attention.ipynb", (2027, 1, 1, 0, 0, 0)
    )
    assert intake_time.from_zip(info, attempt, BERLIN) == Handed(
        datetime(2026, 12, 5, 10, 30, tzinfo=BERLIN), "LMS file name"
    )


def test_without_an_attempt_time_the_zip_entry_time_is_read_in_the_course_zone():
    info, attempt = zip_entry("ada_attention.ipynb", (2026, 12, 5, 10, 30, 2))
    got = intake_time.from_zip(info, attempt, BERLIN)
    assert got == Handed(datetime(2026, 12, 5, 10, 30, 2, tzinfo=BERLIN), "zip entry time")
    assert got.at.astimezone(UTC).hour == 9
    impossible, attempt = zip_entry(
        "03_attention_ada_attempt_2026-13-45-10-30-00_attention.ipynb", (2026, 12, 5, 8, 0, 0)
    )
    assert intake_time.from_zip(impossible, attempt, BERLIN).source == "zip entry time"


def test_nbgraders_timestamp_is_read_as_nbgrader_reads_it(tmp_path):
    (tmp_path / "attention.ipynb").write_text("{}")
    (tmp_path / "timestamp.txt").write_text("2026-12-05 10:30:00.250000 CET\n")
    got, reason = intake_time.from_folder(tmp_path, BERLIN)
    assert reason is None and got.source == "timestamp.txt"
    assert got.at == datetime(2026, 12, 5, 9, 30, 0, 250000, tzinfo=UTC)
    nbgrader_reads = CourseDirectory().get_existing_timestamp(str(tmp_path))
    assert got.at.replace(tzinfo=None) == nbgrader_reads


@pytest.mark.parametrize(
    "content, said",
    [
        (b"handed in on Friday evening", "not a time in nbgrader's format"),
        (b"", "is empty"),
        (b"2026-12-05 10:30:00 Mars/Olympus", "unknown time zone"),
        (b"\xff\xfe2026", "not UTF-8"),
        (b"2026-12-05 10:30:00 UTC" + b" " * 300, "over 200 bytes"),
    ],
)
def test_a_garbage_timestamp_is_reported_and_the_folder_time_stands_in(tmp_path, content, said):
    notebook = tmp_path / "attention.ipynb"
    notebook.write_text("{}")
    os.utime(notebook, (1_790_000_000, 1_790_000_000))
    (tmp_path / "timestamp.txt").write_bytes(content)
    got, reason = intake_time.from_folder(tmp_path, BERLIN)
    assert said in reason and "the folder's time is used instead" in reason
    assert got == Handed(datetime.fromtimestamp(1_790_000_000, tz=BERLIN), "folder time")


def test_a_timestamp_that_is_a_link_is_not_followed(tmp_path):
    """A link would read a file outside the submission (the attack); the intake refuses it."""
    secret = tmp_path / "secret.txt"
    secret.write_text("2026-12-01 00:00:00 UTC")
    folder = tmp_path / "ada" / "03_attention"
    folder.mkdir(parents=True)
    (folder / "attention.ipynb").write_text("{}")
    (folder / "timestamp.txt").symlink_to(secret)
    assert (folder / "timestamp.txt").read_text() == secret.read_text()  # following it reads the target
    got, reason = intake_time.from_folder(folder, BERLIN)
    assert got.source == "folder time"
    assert "not a regular file" in reason


def test_the_newest_notebook_gives_the_folder_time(tmp_path):
    for name, seconds in (("a.ipynb", 1_700_000_000), ("b.ipynb", 1_800_000_000)):
        (tmp_path / name).write_text("{}")
        os.utime(tmp_path / name, (seconds, seconds))
    got, reason = intake_time.from_folder(tmp_path, BERLIN)
    assert reason is None and got.at == datetime.fromtimestamp(1_800_000_000, tz=BERLIN)


def test_a_recorded_time_reads_back_with_its_source_and_nbgrader_sees_it(tmp_path):
    moment = Handed(datetime(2026, 10, 25, 2, 30, fold=1, tzinfo=BERLIN), "LMS file name")  # the second 02:30
    intake_time.record(tmp_path, moment)
    back = intake_time.read(tmp_path)
    assert back == moment and back.at.utcoffset() == timedelta(hours=1)
    assert (tmp_path / "timestamp.txt").read_text() == "2026-10-25 01:30:00.000000 UTC\n"
    assert CourseDirectory().get_existing_timestamp(str(tmp_path)) == datetime(2026, 10, 25, 1, 30)
    (tmp_path / "handed.json").unlink()
    assert intake_time.read(tmp_path) == Handed(datetime(2026, 10, 25, 1, 30, tzinfo=UTC), "timestamp.txt")
    assert intake_time.read(tmp_path / "none") is None


def test_an_unreadable_record_is_a_problem_at_export_and_the_folder_time_stands_in(tmp_path):
    folder = tmp_path / "submitted" / "ada" / "01_embedding"
    folder.mkdir(parents=True)
    (folder / "embedding.ipynb").write_text("{}")
    (folder / "handed.json").write_text("{not json")
    with pytest.raises(intake_time.UnreadableRecord, match="handed.json"):
        intake_time.read(folder)
    times, problems = late.handed_times(tmp_path, [("ada", "01_embedding"), ("ben", "01_embedding")], BERLIN)
    assert times["ada", "01_embedding"].source == "folder time"
    assert times["ben", "01_embedding"] is None
    assert [(p.student, p.lesson) for p in problems] == [("ada", "01_embedding")]
    assert "not a hand-in record" in problems[0].what


def test_a_hand_in_time_must_carry_a_zone_and_a_known_source():
    with pytest.raises(ValueError, match="needs a time zone"):
        Handed(datetime(2026, 12, 5, 10, 30), "folder time")
    with pytest.raises(ValueError, match="unknown source"):
        Handed(datetime(2026, 12, 5, 10, 30, tzinfo=UTC), "the student said so")


@pytest.mark.parametrize(
    ("seconds", "words"),
    [(0, "0 s"), (0.2, "1 s"), (59.5, "1 min"), (185, "3 min 5 s"), (37860, "10 h 31 min"),
     (86400, "1 day"), (88260, "1 day 31 min"), (180100, "2 days 2 h")],
)  # fmt: skip
def test_an_interval_reads_as_its_two_largest_units_rounded_up(seconds, words):
    """One spelling for the time left in a run and for how late a hand-in was: a fraction of a
    second late is '1 s', never '0 s' (on time)."""
    assert durations.in_words(seconds) == words
