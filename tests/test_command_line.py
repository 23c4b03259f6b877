"""The instructor's command line: every option reaches the pipeline, and no command loses work."""

import hashlib

import pytest

from autograder import __main__ as command_line
from autograder import lessons
from autograder.engine.kernels.sandbox import Limits
from autograder.engine.pipeline import Pipeline


@pytest.fixture
def opened(monkeypatch, tmp_path) -> list[dict]:
    """The keyword arguments of every Pipeline the command line opens (none is really opened)."""
    calls: list[dict] = []

    class Recorder:
        def __init__(self, workspace, **kwargs):
            calls.append({"workspace": workspace, **kwargs})

        def __getattr__(self, name):
            return lambda *args, **kwargs: []

    monkeypatch.setattr(command_line, "Pipeline", Recorder)
    monkeypatch.setattr(command_line.grades, "feedback", lambda pipeline: [])  # no gradebook to read
    monkeypatch.chdir(tmp_path)
    return calls


def test_cold_kernels_and_every_limit_reach_the_pipeline(opened):
    command_line.main(["--workspace", "w", "feedback"])
    command_line.main(
        [
            "--workspace",
            "w",
            "--cold-kernels",
            "--memory-gib",
            "2",
            "--cpu-s",
            "9",
            "--open-files",
            "77",
            "--tasks",
            "33",
            "--folder-mib",
            "5",
            "--folder-files",
            "6",
            "feedback",
        ]
    )
    assert [call["warm"] for call in opened] == [True, False]
    assert opened[0]["sandbox"] == Limits()
    assert opened[1]["sandbox"] == Limits(
        memory_gib=2.0, cpu_s=9, open_files=77, tasks=33, folder_mib=5, folder_files=6
    )


def test_the_demo_never_deletes_a_folder_it_did_not_make(tmp_path, capsys):
    work = tmp_path / "thesis"
    work.mkdir()
    (work / "chapter1.tex").write_text("months of work")
    assert command_line.main(["demo", "--into", str(work)]) == 2
    assert "is not empty and no demo made it" in capsys.readouterr().err
    assert (work / "chapter1.tex").read_text() == "months of work"


def _untouched(folder) -> dict[str, tuple]:
    """Each file's contents, inode and modification time: a file rewritten with the same bytes
    (as nbgrader would regenerate a notebook nobody changed) still shows."""
    return {
        str(p): (hashlib.sha256(p.read_bytes()).hexdigest(), p.stat().st_ino, p.stat().st_mtime_ns)
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def test_release_writes_into_the_workspace_and_leaves_the_checkouts_course_alone(tmp_path):
    before = _untouched(lessons.COURSE)
    lesson = lessons.LESSON_NAMES[0]
    pipeline = Pipeline(tmp_path / "workspace", log=lambda *_: None)
    pipeline.release([lesson])
    assert (tmp_path / "workspace" / "release" / lesson / lessons.notebook_name(lesson)).is_file()
    assert _untouched(lessons.COURSE) == before
