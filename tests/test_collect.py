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
    assert pipeline.submissions() == [("03_attention", "ada"), ("03_attention", "ben")]
    assert [(p.student, p.lesson) for p in pipeline.problems] == [("cho", "03_attention")]
    assert "is not a valid notebook" in pipeline.problems[0].what


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
    assert pipeline.submissions() == [("03_attention", "ada")]
    assert [p.what for p in pipeline.problems] == ["bonus.ipynb: unknown lesson '99_bonus'"]


# A correct notebook's slowest cell (the import of torch, about 3 s on a quiet 2-core machine)
# stays well under this limit on a loaded machine too.
RUNAWAY_LIMIT_S = 20
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
