"""Taking in submissions: folders and LMS zip downloads; bad files are reported, not fatal."""

import zipfile

from autograder import lessons
from autograder.pipeline import Pipeline


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
