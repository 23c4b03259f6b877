"""Taking in submissions: folders and LMS zip downloads; bad files are reported, not fatal."""

import zipfile

import nbformat

from autograder import lessons
from autograder.engine.pipeline import Pipeline


def _pipeline(tmp_path):
    return Pipeline(tmp_path / "workspace", release=tmp_path / "release", log=lambda *_: None)


def test_zip_download_is_sorted_by_student(tmp_path):
    notebook = lessons.course_path("03_attention").read_text()
    archive = tmp_path / "download.zip"
    with zipfile.ZipFile(archive, "w") as bundle:
        bundle.writestr("03_attention_ada_attempt_2026-11-20-10-00-00_attention.ipynb", notebook)
        bundle.writestr("ben_attention.ipynb", notebook)
        bundle.writestr("cho_attention.ipynb", notebook[:500])  # cut short
        bundle.writestr("notes.txt", "not a notebook")
    pipeline = _pipeline(tmp_path)
    pipeline.collect_zip(archive, "03_attention")
    assert pipeline.submissions() == [("ada", "03_attention"), ("ben", "03_attention")]
    assert [(p.student, p.lesson) for p in pipeline.problems] == [("cho", "03_attention")]
    assert "is not a valid notebook" in pipeline.problems[0].what


def _download(tmp_path, entries: dict[str, str]):
    archive = tmp_path / "download.zip"
    with zipfile.ZipFile(archive, "w") as bundle:
        for name, text in entries.items():
            bundle.writestr(name, text)
    return archive


def _marked(text: str, who: str) -> str:
    """The lesson's notebook with a mark of whose it is in its metadata."""
    nb = nbformat.reads(text, as_version=4)
    nb.metadata["handed_in_by"] = who
    return nbformat.writes(nb)


def _owner(pipeline, student: str) -> str:
    path = pipeline.submitted / student / "03_attention" / "attention.ipynb"
    return nbformat.read(path, as_version=4).metadata["handed_in_by"]


def test_canvas_names_give_the_canvas_user_id_and_the_lessons_notebook(tmp_path):
    notebook = lessons.course_path("03_attention").read_text()
    archive = _download(
        tmp_path,
        {
            "doejane_LATE_123456_7890123_attention-1.ipynb": _marked(notebook, "jane"),
            "smithbob_234567_8901234_attention.ipynb": _marked(notebook, "bob"),
            "smithbob_234567_8901234_notes.txt": "my notes",
        },
    )
    pipeline = _pipeline(tmp_path)
    pipeline.collect_zip(archive, "03_attention")
    assert pipeline.problems == []
    assert pipeline.submissions() == [("123456", "03_attention"), ("234567", "03_attention")]
    # each notebook keeps the lesson's name, which nbgrader grades by, and its own content
    assert (_owner(pipeline, "123456"), _owner(pipeline, "234567")) == ("jane", "bob")


def test_moodle_names_give_the_participant_id(tmp_path):
    notebook = lessons.course_path("03_attention").read_text()
    archive = _download(
        tmp_path,
        {
            "Jane Doe_345678_assignsubmission_file_/attention.ipynb": _marked(notebook, "jane"),
            "Bob Smith_456789_assignsubmission_file_attention.ipynb": _marked(notebook, "bob"),
        },
    )
    pipeline = _pipeline(tmp_path)
    pipeline.collect_zip(archive, "03_attention")
    assert pipeline.problems == []
    assert (_owner(pipeline, "345678"), _owner(pipeline, "456789")) == ("jane", "bob")


# A Blackboard attempt's record; the learner's comment names someone else, and is not read.
BLACKBOARD_RECORD = """Name: {name} ({user})
Assignment: Lesson 3
Date Submitted: Friday, 20 November 2026 10:00:00 o'clock CET

Comments:
Name: Someone Else (cho)
"""


def test_a_blackboard_user_name_with_an_underscore_stays_whole_beside_its_tail(tmp_path):
    """j_doe and doe: both are taken in, each with their own notebook, by the attempts' records
    (the assignment here is not named after the lesson) or, without records, by the lesson's name."""
    notebook = lessons.course_path("03_attention").read_text()
    with_records = {}
    for user, name in (("j_doe", "Jane Doe"), ("doe", "John Doe")):
        attempt = f"Lesson 3_{user}_attempt_2026-11-20-10-00-00"
        with_records[f"{attempt}_attention.ipynb"] = _marked(notebook, user)
        with_records[f"{attempt}.txt"] = BLACKBOARD_RECORD.format(name=name, user=user)
    pipeline = _pipeline(tmp_path)
    pipeline.collect_zip(_download(tmp_path, with_records), "03_attention")
    assert pipeline.problems == []
    assert (_owner(pipeline, "j_doe"), _owner(pipeline, "doe")) == ("j_doe", "doe")

    lesson_named = {
        f"03_attention_{user}_attempt_2026-11-20-10-00-00_attention.ipynb": _marked(notebook, user)
        for user in ("j_doe", "doe")
    }
    again = Pipeline(tmp_path / "again", release=tmp_path / "release", log=lambda *_: None)
    again.collect_zip(_download(tmp_path, lesson_named), "03_attention")
    assert again.problems == []
    assert (_owner(again, "j_doe"), _owner(again, "doe")) == ("j_doe", "doe")


def test_a_blackboard_name_that_cannot_be_split_is_refused_and_says_why(tmp_path):
    notebook = lessons.course_path("03_attention").read_text()
    archive = _download(tmp_path, {"Lesson 3_j_doe_attempt_2026-11-20-10-00-00_attention.ipynb": notebook})
    pipeline = _pipeline(tmp_path)
    pipeline.collect_zip(archive, "03_attention")
    assert pipeline.submissions() == []
    [problem] = pipeline.problems
    assert "holds no record of the attempt" in problem.what


def test_a_notebook_handed_in_twice_is_refused_and_both_are_reported(tmp_path):
    notebook = lessons.course_path("03_attention").read_text()
    archive = _download(
        tmp_path,
        {
            "03_attention_ada_attempt_2026-11-20-10-00-00_attention.ipynb": notebook,
            "03_attention_ada_attempt_2026-11-21-09-00-00_attention.ipynb": notebook,
            "03_attention_ben_attempt_2026-11-20-11-00-00_attention.ipynb": notebook,
        },
    )
    pipeline = _pipeline(tmp_path)
    pipeline.collect_zip(archive, "03_attention")
    assert pipeline.submissions() == [("ben", "03_attention")]
    [problem] = pipeline.problems
    assert problem.student == "ada" and problem.what.startswith("attention.ipynb handed in 2 times")
    assert "2026-11-20-10-00-00" in problem.what and "2026-11-21-09-00-00" in problem.what


def test_every_notebook_not_taken_in_is_reported(tmp_path):
    notebook = lessons.course_path("03_attention").read_text()
    archive = _download(
        tmp_path,
        {
            "doejane_123456_7890123_attention.ipynb": notebook,
            "doejane_123456_7890123_scratch.ipynb": notebook,  # beside the lesson's notebook
            "smithbob_234567_8901234_attention_final.ipynb": notebook,  # renamed by the learner
            "leeann_345678_9012345_draft.ipynb": notebook,  # two notebooks, neither the lesson's
            "leeann_345678_9012345_draft2.ipynb": notebook,
            "attention.ipynb": notebook,  # whose?
            "notes.txt": "not a notebook",  # not reported
        },
    )
    pipeline = _pipeline(tmp_path)
    pipeline.collect_zip(archive, "03_attention")
    # the renamed notebook is the attempt's only one: graded under the lesson's name, and said so
    assert pipeline.submissions() == [("123456", "03_attention"), ("234567", "03_attention")]
    assert (pipeline.submitted / "234567" / "03_attention" / "attention.ipynb").is_file()
    assert sorted((p.student, p.what) for p in pipeline.problems) == [
        (
            "123456",
            "doejane_123456_7890123_scratch.ipynb: another notebook beside attention.ipynb in the "
            "attempt; not taken in",
        ),
        (
            "234567",
            "smithbob_234567_8901234_attention_final.ipynb: the learner named the notebook "
            "'attention_final.ipynb'; taken in as attention.ipynb",
        ),
        (
            "345678",
            "2 notebooks in the attempt (leeann_345678_9012345_draft.ipynb, "
            "leeann_345678_9012345_draft2.ipynb), none named attention.ipynb: none taken in",
        ),
        (
            "?",
            "attention.ipynb: not named as Canvas names a hand-in (the LMS its names fit best) "
            "nor as <student>_attention.ipynb; not taken in",
        ),
    ]


def test_folder_with_an_unknown_lesson_is_reported(tmp_path):
    inbox = tmp_path / "inbox"
    (inbox / "ada" / "03_attention").mkdir(parents=True)
    (inbox / "ada" / "99_bonus").mkdir(parents=True)
    (inbox / "ada" / "03_attention" / "attention.ipynb").write_text(
        lessons.course_path("03_attention").read_text()
    )
    (inbox / "ada" / "99_bonus" / "bonus.ipynb").write_text("{}")
    pipeline = _pipeline(tmp_path)
    pipeline.collect_folder(inbox)
    assert pipeline.submissions() == [("ada", "03_attention")]
    assert [p.what for p in pipeline.problems] == ["bonus.ipynb: unknown lesson '99_bonus'"]


# A correct notebook's slowest cell stays well under this limit on a loaded machine too: in a warm
# kernel (the pipeline's default) the imports are done before the first cell, and every cell here
# takes under a second; a cold kernel's import of torch takes about 3 s on a quiet 2-core machine.
RUNAWAY_LIMIT_S = 8
# The first Embedding ever built never finishes; the ones after it do. So the cell that builds
# it first runs away, and the cells after it show that grading went on past it.
RUNAWAY = """super().__init__()
        global _built
        try:
            _built += 1
        except NameError:
            _built = 1
        while _built == 1:
            pass"""


def test_a_runaway_submission_costs_only_itself(tmp_path):
    from autograder.authoring.samples import filled

    inbox = tmp_path / "inbox"
    runaway = filled("01_embedding")
    for cell in runaway.cells:
        if cell.metadata.get("nbgrader", {}).get("solution"):
            cell.source = cell.source.replace("super().__init__()", RUNAWAY)
    for student, nb in (("ada", filled("01_embedding")), ("zed", runaway)):
        path = inbox / student / "01_embedding" / "embedding.ipynb"
        path.parent.mkdir(parents=True)
        nbformat.write(nb, path)
    pipeline = Pipeline(
        tmp_path / "workspace",
        release=tmp_path / "release",
        log=lambda *_: None,
        cell_timeout_s=RUNAWAY_LIMIT_S,
    )
    pipeline.release(["01_embedding"])
    pipeline.collect_folder(inbox)
    verdicts = pipeline.autograde()
    # nbgrader interrupts the runaway cell at the limit and goes on: that cell scores 0, the next
    # one its points, the other student everything, and the report says which cell and why
    assert pipeline.scores() == {("ada", "01_embedding"): (3.0, 3.0), ("zed", "01_embedding"): (2.0, 3.0)}
    # the verdicts returned are what the gradebook recorded, cell by cell
    assert {(v.student, v.lesson): v.score for v in verdicts} == pipeline.scores()
    zed = next(v for v in verdicts if v.student == "zed")
    assert zed.scores["test_Embedding_shapes"] == (0.0, 1.0) and zed.failure is None
    [problem] = pipeline.problems
    assert (problem.student, problem.lesson) == ("zed", "01_embedding")
    assert problem.what == (
        f"cells stopped after {RUNAWAY_LIMIT_S} s (an endless loop?), scored 0: test_Embedding_shapes"
    ), problem.what


def test_a_failed_run_is_named_by_what_stopped_it_not_by_its_log():
    from nbgrader.converters.base import NbGraderException

    from autograder.engine.execute import GradingStopped
    from autograder.engine.submission import failure_reason

    stopped = GradingStopped("the kernel exited while running the test cell test_x")
    assert failure_reason(stopped) == "the kernel exited while running the test cell test_x"
    assert (
        failure_reason(NbGraderException("no gradebook entry\nmore"))
        == "NbGraderException: no gradebook entry"
    )
    assert failure_reason(KeyError()) == "KeyError"
