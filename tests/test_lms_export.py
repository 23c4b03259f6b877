"""Grades an LMS takes: the roster (ours, or Canvas's own gradebook export), Canvas's and Moodle's
imports read back as the LMS reads them (header, points-possible row, lesson columns, the matching
column), one lesson's graded rows only, names that survive, late penalties applied (a download's
entry times stated, never deducted), and nobody dropped silently; and the bundled sample course,
end to end."""

import csv
import shutil
from datetime import datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from autograder.engine import intake_time
from autograder.engine.intake_time import Handed, Taken
from autograder.engine.pipeline import Pipeline
from autograder.instructor import grades, late, lms

SAMPLE_COURSE = Path(__file__).resolve().parent.parent / "autograder" / "sample_course"
BERLIN = ZoneInfo("Europe/Berlin")
DUE = datetime(2026, 12, 4, 23, 59, tzinfo=BERLIN)
NAMES = {"ada": "Çetin, Ada", "ben": 'Okafor, Benjamin "Ben"', "cho": "陈楚 (Chen Chu)"}


def _export(
    workspace: Path,
    scores: dict,
    roster: Path,
    out: Path,
    kind: str,
    failed: dict | None = None,
    lesson: str | None = None,
) -> list:
    """The LMS file of ``scores`` as the export command writes it (grades after late work)."""
    return grades.lms_file(grades.assess(workspace, scores, failed), workspace, kind, roster, out, lesson)


def roster_file(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "roster.csv"
    path.write_text(text, encoding="utf-8")
    return path


@pytest.fixture
def roster(tmp_path) -> lms.Roster:
    rows = [
        [
            "\ufeffStudent",
            "Name",
            "Canvas ID",
            "SIS User ID",
            "SIS Login ID",
            "Section",
            "Email",
            "ID number",
            "Notes",
        ],
        ["ada", NAMES["ada"], "1001", "S-1001", "ada.cetin", "A", "Ada.Cetin@uni.example", "0001", "x"],
        ["ben", NAMES["ben"], "1002", "S-1002", "ben.okafor", "A", "ben@uni.example", "0002", ""],
        ["cho", NAMES["cho"], "1003", "S-1003", "chen.chu", "B", "", "0003", ""],
        ["gus", "Ångström, Gustav", "1006", "S-1006", "gus", "B", "gus@uni.example", "0006", ""],
    ]
    path = tmp_path / "roster.csv"
    with path.open("w", newline="", encoding="utf-8") as handle:
        csv.writer(handle).writerows(rows)
    return lms.read_roster(path)


def graded(policy: late.Policy | None = None) -> dict:
    """ada on time, ben a day late, cho two lessons, fay (not in the roster) one."""
    scores = {
        ("ada", "01_embedding"): (6.0, 6.0),
        ("ada", "03_attention"): (8.0, 10.0),
        ("ben", "01_embedding"): (6.0, 6.0),
        ("cho", "01_embedding"): (3.5, 6.0),
        ("cho", "03_attention"): (10.0, 10.0),
        ("fay", "03_attention"): (7.0, 10.0),
    }
    handed = {key: Handed(DUE - timedelta(hours=1), "LMS file name") for key in scores}
    handed["ben", "01_embedding"] = Handed(DUE + timedelta(hours=10), "LMS file name")
    policy = policy or late.Policy(BERLIN, {"01_embedding": DUE}, per_day=10, cap=50)
    return grades.apply_late(scores, handed, policy)


def canvas_reads(path: Path) -> tuple[list[str], list[str], dict[str, dict[str, str]]]:
    """As Canvas's import reads a gradebook file: the header, the points-possible row, the rows by ID."""
    with path.open(newline="", encoding="utf-8") as handle:
        rows = list(csv.reader(handle))
    header, points, *people = rows
    return header, points, {row[1]: dict(zip(header, row, strict=True)) for row in people}


def test_the_roster_takes_a_bom_any_case_and_extra_columns(roster):
    assert [person.student for person in roster.people] == ["ada", "ben", "cho", "gus"]
    ada = roster.people[0]
    assert (ada.name, ada.canvas_id, ada.sis_user_id, ada.sis_login_id) == (
        NAMES["ada"],
        "1001",
        "S-1001",
        "ada.cetin",
    )
    assert (ada.section, ada.email, ada.id_number) == ("A", "Ada.Cetin@uni.example", "0001")
    assert roster.people[1].name == NAMES["ben"] and roster.people[2].name == NAMES["cho"]


@pytest.mark.parametrize(
    "text, said",
    [
        ("name,email\nAda,ada@x\n", ["line 1 has no 'student' column", "student,name,canvas_id"]),
        ('student,name\n"Çetin, Ada",Ada\n', ["line 2", "'Çetin, Ada' is not a student id"]),
        ("student,name\n../ada,Ada\n", ["line 2", "'../ada'"]),
        ("student,name\nada,Ada\n\nada,Ada again\n", ["line 4", "student ada is on line 2 already"]),
        ("student,Student,name\nada,ada,Ada\n", ["line 1 names student more than once"]),
    ],
)
def test_the_roster_is_strict_about_the_id_column(tmp_path, text, said):
    with pytest.raises(lms.RosterError) as error:
        lms.read_roster(roster_file(tmp_path, text))
    for part in ["roster.csv", *said]:
        assert part in str(error.value)


def test_canvas_reads_the_header_the_points_row_and_the_lessons(tmp_path, roster):
    path = tmp_path / "canvas.csv"
    lms.canvas_csv(path, roster, graded(), {"03_attention": 90103})
    header, points, people = canvas_reads(path)
    assert header == [
        "Student",
        "ID",
        "SIS User ID",
        "SIS Login ID",
        "Section",
        "01_embedding",
        "03_attention (90103)",
    ]
    assert points == ["    Points Possible", "", "", "", "", "6", "10"]
    assert set(people) == {"1001", "1002", "1003"}  # gus handed nothing in, fay is not in the roster
    assert people["1001"] == {
        "Student": NAMES["ada"],
        "ID": "1001",
        "SIS User ID": "S-1001",
        "SIS Login ID": "ada.cetin",
        "Section": "A",
        "01_embedding": "6",
        "03_attention (90103)": "8",
    }
    assert people["1002"]["Student"] == NAMES["ben"] and people["1002"]["01_embedding"] == "5.4"  # a day late
    assert people["1002"]["03_attention (90103)"] == ""  # nothing handed in: Canvas changes nothing
    assert people["1003"]["Student"] == NAMES["cho"] and people["1003"]["01_embedding"] == "3.5"


def test_names_are_quoted_in_utf8_without_a_bom(tmp_path, roster):
    path = tmp_path / "canvas.csv"
    lms.canvas_csv(path, roster, graded(), {})
    data = path.read_bytes()
    assert not data.startswith(b"\xef\xbb\xbf")
    assert b'"Okafor, Benjamin ""Ben"""' in data and "陈楚 (Chen Chu)".encode() in data


def test_nobody_is_dropped_silently(tmp_path, roster):
    problems = lms.canvas_csv(tmp_path / "canvas.csv", roster, graded(), {})
    found = {(p.student, p.lesson): p.what for p in problems}
    assert (
        "not in the roster roster.csv" in found["fay", "03_attention"]
        and "7 points" in found["fay", "03_attention"]
    )
    assert "in the roster roster.csv but no graded submission" in found["gus", "-"]
    assert "no graded submission of 1 of 2 lessons (03): their cells are left empty" in found["ben", "-"]
    assert set(found) == {("fay", "03_attention"), ("gus", "-"), ("ben", "-")}


def test_moodle_reads_the_matching_column_and_the_grade_columns(tmp_path, roster):
    path = tmp_path / "moodle.csv"
    problems = lms.moodle_csv(path, roster, graded(), "email")
    with path.open(newline="", encoding="utf-8") as handle:
        header, *rows = list(csv.reader(handle))
    assert header == ["ID number", "Email address", "Full name", "01_embedding", "03_attention"]
    by_email = {row[1]: dict(zip(header, row, strict=True)) for row in rows}
    assert set(by_email) == {"Ada.Cetin@uni.example", "ben@uni.example"}  # as written: Moodle matches case
    assert by_email["ben@uni.example"]["01_embedding"] == "5.4"
    assert by_email["Ada.Cetin@uni.example"]["Full name"] == NAMES["ada"]
    assert ("cho", "-") in {(p.student, p.lesson) for p in problems if "gives no email" in p.what}
    lms.moodle_csv(path, roster, graded(), "id_number")
    with path.open(newline="", encoding="utf-8") as handle:
        assert {row[0] for row in list(csv.reader(handle))[1:]} == {"0001", "0002", "0003"}
    with pytest.raises(ValueError, match="expected one of email, id_number"):
        lms.moodle_csv(path, roster, graded(), "username")


def test_the_canvas_ids_come_from_course_toml(tmp_path):
    (tmp_path / "course.toml").write_text("[canvas]\n01_embedding = 90101\n")
    assert lms.canvas_ids(tmp_path) == {"01_embedding": 90101}
    (tmp_path / "course.toml").write_text('[canvas]\n01_embedding = "https://canvas/x"\n')
    with pytest.raises(late.CourseFileError, match=r"\[canvas\] 01_embedding = 'https://canvas/x'"):
        lms.canvas_ids(tmp_path)


def test_the_sample_course_end_to_end(tmp_path):
    """The demo's files: timestamps as nbgrader's exchange leaves them, the roster, course.toml,
    the extension; scores as the gradebook gives them (all full marks, to see the penalties)."""
    workspace = tmp_path / "workspace"
    shutil.copytree(SAMPLE_COURSE / "timestamps", workspace / "submitted")
    for name in ("course.toml", "extensions.csv"):
        shutil.copy(SAMPLE_COURSE / name, workspace / name)
    scores = {
        (folder.parent.name, folder.name): (10.0, 10.0) for folder in (workspace / "submitted").glob("*/*")
    }
    assert len(scores) == 37  # ada, ben, cho: 11 lessons each; dev 1, eve 2, fay 1
    problems = _export(workspace, scores, SAMPLE_COURSE / "roster.csv", tmp_path / "canvas.csv", "canvas")
    header, points, people = canvas_reads(tmp_path / "canvas.csv")
    assert (
        header[5:7] == ["01_embedding (90101)", "02_positional_encoding"] and "03_attention (90103)" in header
    )
    assert set(points[5:]) == {"10"}
    ben = people["1002"]
    assert ben["Student"] == 'Okafor, Benjamin "Ben"'
    assert ben["01_embedding (90101)"] == "10"  # three hours early
    assert ben["02_positional_encoding"] == "9"  # one second late
    assert ben["03_attention (90103)"] == "9"  # 24 h late to the second: one day
    assert ben["04_masking"] == "8"  # 24 h 31 min, across the night the clocks go back: two days
    assert people["1003"]["03_attention (90103)"] == "10"  # late, within cho's extension
    assert people["1005"]["01_embedding (90101)"] == "10"  # at the due date to the second
    assert people["1005"]["03_attention (90103)"] == "5"  # 15 days: the cap
    assert people["1001"]["Student"] == "Çetin, Ada" and people["1005"]["Student"] == "Ева Смирнова"
    found: dict[tuple[str, str], str] = {}
    for problem in problems:
        found[problem.student, problem.lesson] = (
            found.get((problem.student, problem.lesson), "") + problem.what
        )
    # dev's timestamp.txt is garbage: reported; lateness by the files' own time is never deducted
    assert "not a time in nbgrader's format" in found["dev", "03_attention"]
    assert "late by the notebook's file time only, not deducted" in found["dev", "03_attention"]
    assert people["1004"]["03_attention (90103)"] == "10"
    assert "not in the roster" in found["fay", "03_attention"]
    assert "no graded submission" in found["gus", "-"]
    moodle = _export(workspace, scores, SAMPLE_COURSE / "roster.csv", tmp_path / "moodle.csv", "moodle-email")
    assert {p.student for p in moodle} >= {"dev", "fay", "gus"}
    with pytest.raises(ValueError, match="expected canvas, moodle-email or moodle-id_number"):
        _export(workspace, scores, SAMPLE_COURSE / "roster.csv", tmp_path / "x.csv", "blackboard")


def _sample_pipeline(tmp_path: Path, monkeypatch) -> Pipeline:
    """A workspace of the sample course's hand-in times, every submission at full marks."""
    workspace = tmp_path / "workspace"
    shutil.copytree(SAMPLE_COURSE / "timestamps", workspace / "submitted")
    for name in ("course.toml", "extensions.csv"):
        shutil.copy(SAMPLE_COURSE / name, workspace / name)
    pipeline = Pipeline(workspace, sandbox=None, log=lambda *_: None)
    scores = {(folder.parent.name, folder.name): (10.0, 10.0) for folder in pipeline.submitted.glob("*/*")}
    monkeypatch.setattr(pipeline, "scores", lambda: scores)
    return pipeline


def test_the_terminal_table_shows_the_exports_figures_after_late_work(tmp_path, monkeypatch):
    pipeline = _sample_pipeline(tmp_path, monkeypatch)
    grades.export_lms(pipeline, "canvas", SAMPLE_COURSE / "roster.csv", tmp_path / "canvas.csv")
    ben = canvas_reads(tmp_path / "canvas.csv")[2]["1002"]
    row = next(line.split() for line in grades.table(pipeline).splitlines() if line.startswith("ben "))
    assert (ben["02_positional_encoding"], row[2]) == ("9", "9/10")  # one second late, in both
    assert (ben["04_masking"], row[4]) == ("8", "8/10")
    assert "scores after late penalties" in grades.table(pipeline)


def test_grades_csv_the_table_and_canvas_give_one_set_of_grades(tmp_path, monkeypatch):
    """Late work is applied in one place (grades.of): every after_late of grades.csv is the
    table's and Canvas's figure, and grades.csv alone already reports lateness known from a
    file's time only (only the LMS export did, when each applied late work itself)."""
    pipeline = _sample_pipeline(tmp_path, monkeypatch)
    grades.export(pipeline, tmp_path / "grades.csv")
    said = {(p.student, p.lesson): p.what for p in pipeline.problems}
    assert said["dev", "03_attention"] == (
        "late by the notebook's file time only, not deducted: check when it was handed in"
    )
    with (tmp_path / "grades.csv").open(newline="", encoding="utf-8") as handle:
        rows = [row for row in csv.DictReader(handle) if row["lesson"] != "TOTAL"]
    roster = SAMPLE_COURSE / "roster.csv"
    grades.export_lms(pipeline, "canvas", roster, tmp_path / "canvas.csv")
    header, _, canvas = canvas_reads(tmp_path / "canvas.csv")
    ids = {person.student: person.canvas_id for person in lms.read_roster(roster).people}
    lines = grades.table(pipeline).splitlines()
    columns = lines[0].split()
    table = {line.split()[0]: line.split() for line in lines[1:-1]}
    compared = 0
    for row in rows:
        cell = table[row["student"]][columns.index(row["lesson"].split("_", 1)[0])]
        assert cell == f"{row['after_late']}/{row['max_score']}"
        if row["student"] in ids:
            [column] = [name for name in header if name.startswith(row["lesson"])]
            assert canvas[ids[row["student"]]][column] == row["after_late"]
            compared += 1
    assert len(rows) == 37 and compared == 36  # fay is not in the roster
    assert {row["after_late"] for row in rows} == {"10", "9", "8", "5"}


# Canvas's gradebook export, as Grades > Export writes it: the points-possible row, a row with
# neither name nor ID, the test student Student View makes, then the learners.
CANVAS_EXPORT = """\ufeffStudent,ID,SIS User ID,SIS Login ID,Section,03_attention (90103),Current Score
    Points Possible,,,,,10,(read only)
,,,,,Manual Posting,
"Student, Test",4711,,a1b2c3,Transformers 101,,
"Çetin, Ada",1001,S-1001,ada.cetin,Group A,8,80
"Okafor, Benjamin ""Ben\"\"",1002,S-1002,ben.okafor,Group B,,
"""


def test_canvas_gradebook_export_is_a_roster_as_it_is(tmp_path):
    roster = lms.read_roster(roster_file(tmp_path, CANVAS_EXPORT))
    assert roster.people == [
        lms.Person("1001", "Çetin, Ada", "1001", "S-1001", "ada.cetin", "Group A"),
        lms.Person("1002", NAMES["ben"], "1002", "S-1002", "ben.okafor", "Group B"),
    ]
    broken = CANVAS_EXPORT.replace(",1002,", ",10 02,")
    with pytest.raises(lms.RosterError, match=r"line 6: ID '10 02' is not a student id"):
        lms.read_roster(roster_file(tmp_path, broken))
    twice = CANVAS_EXPORT.replace(",1002,", ",1001,")
    with pytest.raises(lms.RosterError, match="line 6: ID 1001 is on line 5 already"):
        lms.read_roster(roster_file(tmp_path, twice))


def test_a_canvas_export_as_roster_round_trips_into_canvas(tmp_path):
    """Canvas's ids are the students a Canvas download gives: the file goes back with them."""
    roster = lms.read_roster(roster_file(tmp_path, CANVAS_EXPORT))
    due = {"03_attention": DUE}
    scores = {("1001", "03_attention"): (7.0, 10.0), ("1002", "03_attention"): (10.0, 10.0)}
    exported = grades.apply_late(scores, {key: Handed(DUE, "LMS file name") for key in scores}, _policy(due))
    lms.canvas_csv(tmp_path / "canvas.csv", roster, exported, {"03_attention": 90103})
    header, points, people = canvas_reads(tmp_path / "canvas.csv")
    assert header[5:] == ["03_attention (90103)"] and points[5:] == ["10"]
    assert {key: row["03_attention (90103)"] for key, row in people.items()} == {"1001": "7", "1002": "10"}
    assert people["1002"]["Student"] == NAMES["ben"] and people["1001"]["SIS User ID"] == "S-1001"


def _policy(due: dict) -> late.Policy:
    return late.Policy(BERLIN, due, per_day=10, cap=50)


def _one_lesson_workspace(tmp_path: Path) -> tuple[Path, dict]:
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    return workspace, graded_scores()


def graded_scores() -> dict:
    return {
        ("ada", "01_embedding"): (6.0, 6.0),
        ("ada", "03_attention"): (8.0, 10.0),
        ("ben", "01_embedding"): (6.0, 6.0),
        ("cho", "03_attention"): (10.0, 10.0),
        ("gus", "03_attention"): (4.0, 10.0),
    }


@pytest.mark.parametrize("kind", ["canvas", "moodle-id_number"])
def test_one_lesson_leaves_alone_with_only_the_rows_it_grades(tmp_path, roster, kind):
    """ben has no grade in 03_attention (and gus's grading failed): no row for them, so whatever
    the LMS holds for them there, entered by hand, stays; no other lesson's column either."""
    workspace, scores = _one_lesson_workspace(tmp_path)
    out = tmp_path / "one.csv"
    failed = {("gus", "03_attention"): "the kernel did not start"}
    problems = _export(workspace, scores, _roster_path(tmp_path), out, kind, failed, "03_attention")
    with out.open(newline="", encoding="utf-8") as handle:
        header, *rows = list(csv.reader(handle))
    if kind == "canvas":
        assert header == [*lms.CANVAS_HEADER, "03_attention"] and rows[0][0] == lms.CANVAS_POINTS_ROW
        rows = rows[1:]
        got = {row[1]: row[5:] for row in rows}
    else:
        assert header == [*lms.MOODLE_HEADER, "03_attention"]
        got = {row[0]: row[3:] for row in rows}
    assert got == ({"1001": ["8"], "1003": ["10"]} if kind == "canvas" else {"0001": ["8"], "0003": ["10"]})
    said = {(p.student, p.lesson): p.what for p in problems}
    assert "grading did not finish" in said["gus", "03_attention"]
    assert "no graded submission: left out of the export" in said["ben", "-"]
    assert not any(lesson == "01_embedding" for _, lesson in said)


def _roster_path(tmp_path: Path) -> Path:
    rows = [
        ["student", "name", "canvas_id", "id_number", "email"],
        ["ada", NAMES["ada"], "1001", "0001", "ada@uni.example"],
        ["ben", NAMES["ben"], "1002", "0002", "ben@uni.example"],
        ["cho", NAMES["cho"], "1003", "0003", "cho@uni.example"],
        ["gus", "Ångström, Gustav", "1006", "0006", "gus@uni.example"],
    ]
    path = tmp_path / "roster-one.csv"
    with path.open("w", newline="", encoding="utf-8") as handle:
        csv.writer(handle).writerows(rows)
    return path


def test_one_lesson_that_is_no_lesson_or_was_not_graded_says_what_was_expected(tmp_path):
    workspace, scores = _one_lesson_workspace(tmp_path)
    out, roster = tmp_path / "x.csv", _roster_path(tmp_path)
    with pytest.raises(ValueError, match="'3_attention' is no lesson; expected one of 01_embedding"):
        _export(workspace, scores, roster, out, "canvas", lesson="3_attention")
    with pytest.raises(ValueError, match="no graded submission of 06_layer_norm.*01_embedding, 03_attention"):
        _export(workspace, scores, roster, out, "canvas", lesson="06_layer_norm")
    assert not out.exists()


def test_export_lesson_is_for_an_lms_file_only(tmp_path, capsys):
    from autograder.__main__ import main

    with pytest.raises(SystemExit) as stopped:
        main(["--workspace", str(tmp_path), "export", "--lesson", "03_attention"])
    assert stopped.value.code == 2
    assert "export --lesson needs --canvas ROSTER or --moodle ROSTER" in capsys.readouterr().err


def test_a_downloads_entry_time_is_stated_and_never_deducted(monkeypatch):
    """Canvas stamps a download's entries with the moment it made the zip, Moodle with its file
    store's time or the download's (docs/hand-in-times.md): such a time costs no points. With the
    entry time counted as a witness (the defence off), a day's lateness took 10%."""
    policy = _policy({"01_embedding": DUE})
    downloaded = Handed(DUE + timedelta(hours=20), "zip entry time")
    assert (
        grades.apply_late(
            {("ada", "01_embedding"): (6.0, 6.0)}, {("ada", "01_embedding"): downloaded}, policy
        )["ada", "01_embedding"].score
        == 6
    )
    said = late.assess(policy, "ada", "01_embedding", downloaded, 6)
    assert (said.days, said.percent) == (1, 0.0) and "the LMS download's file time" in said.statement
    blackboard = late.assess(policy, "ada", "01_embedding", Handed(downloaded.at, "LMS file name"), 6)
    assert (blackboard.days, blackboard.score) == (1, 5.4)  # the LMS's own attempt time does cost
    monkeypatch.setattr(intake_time, "UNPROVEN", ("folder time",))
    assert late.assess(policy, "ada", "01_embedding", downloaded, 6).score == 5.4


def test_a_downloads_entry_time_neither_contradicts_a_claim_nor_replaces_a_record():
    """A timestamp.txt an hour before the zip was made is no contradiction of 'the LMS's time'."""
    claim = Handed(DUE - timedelta(hours=1), "timestamp.txt")
    earlier = [Taken("ada", "01_embedding", "d1", Handed(DUE + timedelta(days=3), "zip entry time"), DUE)]
    now = Taken("ada", "01_embedding", "d1", claim, DUE + timedelta(days=4))
    assert intake_time.contradiction(earlier, now) is None
    assert "zip entry time" not in intake_time.LMS_SOURCES  # a regrade keeps the recorded time over it
    lms_time = [Taken("ada", "01_embedding", "d1", Handed(DUE + timedelta(days=3), "LMS file name"), DUE)]
    assert "the LMS's time for the same notebook" in intake_time.contradiction(lms_time, now)
