"""What comes back from a grading kernel's folder (autograder/engine/submission_files.py), and nbgrader's
steps that touch a submission's folder (autograder/engine/nbgrader_steps.py).

Each case builds a folder as a hostile kernel would leave it and checks exactly what the
grader keeps, and the lines the instructor reads: with ``mirror`` (a warm kernel's slot copied
back into the workspace) and with ``clean`` (a cold kernel's folder, in place). For nbgrader's
steps, each attack is shown succeeding with nbgrader's own converter and failing with the
course's. Last, a cold and a warm kernel leave links in their folders, and the graded
notebook says what was not kept.
"""

import os
import shutil
import socket
import stat
from pathlib import Path

import pytest
from nbconvert.writers import FilesWriter
from nbformat.v4 import new_code_cell, new_notebook
from nbgrader.converters import Autograde, GenerateFeedback
from nbgrader.coursedir import CourseDirectory
from traitlets.config import Config

from autograder.engine import submission_files
from autograder.engine.kernels import zygote
from autograder.engine.kernels.sandbox import SandboxedExecute
from autograder.engine.nbgrader_steps import CourseAutograde, CourseFeedback
from autograder.engine.submission_files import FILES_METADATA, Caps, clean, mirror

LESSON = "01_embedding"
GRADEBOOK = b"SQLite format 3\x00 every grade of the class"
FOLDER = "folder"
HOW = ["mirror", "clean"]


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    """A workspace with its gradebook and mallory's graded folder, three levels below it."""
    workspace = tmp_path / "workspace"
    (workspace / "autograded" / "mallory" / LESSON).mkdir(parents=True)
    (workspace / "gradebook.db").write_bytes(GRADEBOOK)
    return workspace


@pytest.fixture
def kernel(tmp_path: Path) -> Path:
    """The folder the kernel worked in (a warm kernel's slot), holding the learner's notebook."""
    folder = tmp_path / "slot" / "autograded" / "mallory" / LESSON
    folder.mkdir(parents=True)
    (folder / "embedding.ipynb").write_text("{}")
    return folder


def _graded(workspace: Path) -> Path:
    return workspace / "autograded" / "mallory" / LESSON


def _tree(folder: Path) -> dict[str, str]:
    """Everything ``folder`` holds, by relative path: FOLDER, a file's text, or what else it is."""
    found = {}
    for root, folders, files in os.walk(folder):
        for name in folders + files:
            path = Path(root, name)
            mode = path.lstat().st_mode
            kind = FOLDER if stat.S_ISDIR(mode) else path.read_text() if stat.S_ISREG(mode) else "not a file"
            found[str(path.relative_to(folder))] = kind
    return found


def _kept(how: str, kernel: Path, workspace: Path, caps: Caps = Caps()) -> tuple[list[str], dict[str, str]]:  # noqa: B008
    """The report and what is kept, copied back into the workspace or cleaned in place."""
    if how == "mirror":
        return mirror(kernel, _graded(workspace), caps), _tree(_graded(workspace))
    return clean(kernel, caps), _tree(kernel)


@pytest.mark.parametrize("how", HOW)
def test_links_of_every_kind_are_left_out_and_named(how, kernel, workspace, tmp_path):
    run = tmp_path / "checkout" / ".ci" / "run"
    run.parent.mkdir(parents=True)
    run.write_text("#!/bin/sh\n")
    (kernel / "notes").mkdir()
    (kernel / "notes" / "todo.txt").write_text("todo")
    os.symlink("../../../gradebook.db", kernel / "gradebook.ipynb")
    os.symlink("../../../../checkout/.ci/run", kernel / "run.txt")
    os.symlink("/etc", kernel / "etc")
    os.symlink("/dev/zero", kernel / "zero")
    os.symlink("nowhere", kernel / "notes" / "dangling")
    lines, kept = _kept(how, kernel, workspace)
    assert kept == {"embedding.ipynb": "{}", "notes": FOLDER, "notes/todo.txt": "todo"}
    assert lines == [
        "left a symbolic link `etc` -> `/etc`: not kept",
        "left a symbolic link `gradebook.ipynb` -> `../../../gradebook.db`: not kept",
        "left a symbolic link `notes/dangling` -> `nowhere`: not kept",
        "left a symbolic link `run.txt` -> `../../../../checkout/.ci/run`: not kept",
        "left a symbolic link `zero` -> `/dev/zero`: not kept",
    ]
    assert (workspace / "gradebook.db").read_bytes() == GRADEBOOK


@pytest.mark.parametrize("how", HOW)
def test_fifos_and_sockets_are_left_out_without_being_opened(how, kernel, workspace, monkeypatch):
    os.mkfifo(kernel / "pipe")  # opening it to read would wait for a writer forever
    monkeypatch.chdir(kernel)  # a socket's path holds 107 bytes at most: bound by its name alone
    with socket.socket(socket.AF_UNIX) as listener:
        listener.bind("sock")
        listener.listen()
        lines, kept = _kept(how, kernel, workspace)
    assert kept == {"embedding.ipynb": "{}"}
    assert lines == ["left a FIFO `pipe`: not kept", "left a socket `sock`: not kept"]


@pytest.mark.parametrize("how", HOW)
def test_hard_links_come_back_as_their_contents(how, kernel, workspace, tmp_path):
    """Every name of a hard-linked file is copied on its own, even one whose other name lies
    outside the folder (the sandbox makes that impossible: link(2) does not cross its mounts)."""
    (kernel / "a.txt").write_text("mine")
    os.link(kernel / "a.txt", kernel / "b.txt")
    (tmp_path / "outside.txt").write_text("readable anyway")
    os.link(tmp_path / "outside.txt", kernel / "c.txt")
    lines, kept = _kept(how, kernel, workspace)
    assert lines == []
    assert kept == {"embedding.ipynb": "{}", "a.txt": "mine", "b.txt": "mine", "c.txt": "readable anyway"}
    if how == "mirror":  # copies: nothing in the workspace shares its contents with anything
        assert {(_graded(workspace) / name).stat().st_nlink for name in kept} == {1}


@pytest.mark.parametrize("how", HOW)
def test_a_sparse_file_counts_its_apparent_size(how, kernel, workspace):
    with open(kernel / "big.bin", "wb") as handle:
        handle.truncate(2**30)  # 1 GiB that takes no block on disk
    lines, kept = _kept(how, kernel, workspace)
    assert lines == ["left `big.bin` (1.0 GiB), over the cap of 256 MiB: not kept"]
    assert kept == {"embedding.ipynb": "{}"}


def test_a_sparse_file_within_the_cap_comes_back_sparse(kernel, workspace):
    with open(kernel / "big.bin", "wb") as handle:
        handle.seek(2**29)
        handle.write(b"data")
        handle.truncate(2**30)
    assert mirror(kernel, _graded(workspace), Caps(mib=2048)) == []
    copy = _graded(workspace) / "big.bin"
    assert copy.stat().st_size == 2**30 and copy.stat().st_blocks * 512 <= 2**20
    with copy.open("rb") as handle:
        handle.seek(2**29 - 2)
        assert handle.read(8) == b"\0\0data\0\0"


@pytest.mark.parametrize("how", HOW)
def test_past_the_cap_on_files_only_the_first_by_name_are_kept(how, kernel, workspace):
    (kernel / "embedding.ipynb").unlink()
    for number in range(3000):
        (kernel / f"f{number:04}").write_text("x")
    lines, kept = _kept(how, kernel, workspace)
    assert lines == ["left 3,000 files and folders, over the cap of 1,000: kept the first 1,000 by name"]
    assert sorted(kept) == [f"f{number:04}" for number in range(1000)]


@pytest.mark.parametrize("how", HOW)
def test_past_the_cap_on_bytes_what_still_fits_is_kept(how, kernel, workspace):
    for name, kib in (("a.bin", 600), ("b.bin", 600), ("c.bin", 100)):
        (kernel / name).write_bytes(b"x" * kib * 1024)
    lines, kept = _kept(how, kernel, workspace, Caps(mib=1))
    assert lines == ["left `b.bin` (600.0 KiB), over the cap of 1 MiB: not kept"]
    assert sorted(kept) == ["a.bin", "c.bin", "embedding.ipynb"]


def test_what_the_kernel_removed_is_removed_from_the_workspace(kernel, workspace):
    (_graded(workspace) / "old.txt").write_text("old")
    (_graded(workspace) / "old").mkdir()
    assert mirror(kernel, _graded(workspace), Caps()) == []
    assert _tree(_graded(workspace)) == {"embedding.ipynb": "{}"}


def test_a_folder_the_kernel_replaced_by_a_link_counts_as_empty(kernel, workspace, tmp_path):
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "secret.txt").write_text("secret")
    shutil.rmtree(kernel)
    os.symlink(tmp_path / "elsewhere", kernel)
    (_graded(workspace) / "embedding.ipynb").write_text("{}")
    assert mirror(kernel, _graded(workspace), Caps()) == [
        "left no folder of its own (removed, or replaced by a link or a file): nothing kept"
    ]
    assert _tree(_graded(workspace)) == {}


def test_a_file_swapped_for_a_link_after_the_listing_is_not_followed(kernel, workspace, monkeypatch):
    (kernel / "notes.txt").write_text("notes")
    listing = submission_files.listing

    def then_swapped(folder: int):
        found = listing(folder)
        if "notes.txt" in dict(found):  # the kernel's folder: what follows is looked at too late
            (kernel / "notes.txt").unlink()
            os.symlink("../../../gradebook.db", kernel / "notes.txt")
        return found

    monkeypatch.setattr(submission_files, "listing", then_swapped)
    lines = mirror(kernel, _graded(workspace), Caps())
    assert lines == ["left `notes.txt`, which changed while it was copied: not kept"]
    assert _tree(_graded(workspace)) == {"embedding.ipynb": "{}"}


@pytest.mark.parametrize("how", HOW)
def test_set_id_and_sticky_bits_do_not_come_back(how, kernel, workspace):
    (kernel / "tool").write_text("#!/bin/sh\n")
    (kernel / "tool").chmod(0o6755)
    _kept(how, kernel, workspace)
    folder = _graded(workspace) if how == "mirror" else kernel
    assert stat.S_IMODE((folder / "tool").stat().st_mode) == 0o755


@pytest.mark.parametrize("how", HOW)
def test_folders_nested_too_deep_are_left_out(how, kernel, workspace):
    os.makedirs(kernel / "/".join(["d"] * 40))
    lines, kept = _kept(how, kernel, workspace)
    deepest = "/".join(["d"] * 33)
    assert lines == [f"left `{deepest}`, nested more than 32 folders deep: not kept"]
    assert max(kept, key=len) == "/".join(["d"] * 32)


def test_a_folder_of_any_depth_and_mode_is_removed(tmp_path):
    """shutil.rmtree stops at Python's recursion limit (about a thousand folders deep), and
    cannot list a folder the grader may not read."""
    deep = tmp_path / "slot"
    os.makedirs(deep)
    descriptor = os.open(deep, os.O_RDONLY)
    for _ in range(1100):
        os.mkdir("d", dir_fd=descriptor)
        inner = os.open("d", os.O_RDONLY, dir_fd=descriptor)
        os.close(descriptor)
        descriptor = inner
    os.fchmod(descriptor, 0)
    os.close(descriptor)
    with pytest.raises(RecursionError):
        shutil.rmtree(deep)
    submission_files.remove(deep)
    assert not os.path.lexists(deep)


def test_a_flood_of_things_left_out_takes_a_few_lines(kernel, workspace):
    for number in range(25):
        os.symlink("/etc/passwd", kernel / f"link{number:02}")
    lines = mirror(kernel, _graded(workspace), Caps())
    assert len(lines) == 11 and lines[0] == "left a symbolic link `link00` -> `/etc/passwd`: not kept"
    assert lines[-1] == "left 15 more links, FIFOs, sockets, devices or files over a cap: not kept"


def test_a_name_takes_one_line_in_the_report(kernel, workspace):
    os.symlink("x\n,y", kernel / "a\nb\x1b[31m")
    assert mirror(kernel, _graded(workspace), Caps()) == [
        "left a symbolic link `a\\nb\\x1b[31m` -> `x\\n,y`: not kept"
    ]


# nbgrader's steps: each attack works with nbgrader's converter, not with the course's


def _coursedir(workspace: Path) -> CourseDirectory:
    return CourseDirectory(root=str(workspace), course_id="transformer-course")


@pytest.mark.parametrize("converter", [Autograde, CourseAutograde])
def test_the_permission_step_changes_no_links_target(converter, workspace, tmp_path):
    run = tmp_path / "checkout" / ".ci" / "run"
    run.parent.mkdir(parents=True)
    run.write_text("#!/bin/sh\n")
    run.chmod(0o755)
    (_graded(workspace) / "embedding.ipynb").write_text("{}")
    os.symlink(run, _graded(workspace) / "notes.txt")
    converter(coursedir=_coursedir(workspace)).set_permissions(LESSON, "mallory")
    hit = converter is Autograde  # nbgrader's os.chmod follows the link: the run bit is gone
    assert stat.S_IMODE(run.stat().st_mode) == (0o444 if hit else 0o755)
    assert stat.S_IMODE((_graded(workspace) / "embedding.ipynb").stat().st_mode) == 0o444


@pytest.mark.parametrize("converter", [GenerateFeedback, CourseFeedback])
def test_the_feedback_copy_takes_no_link(converter, workspace):
    (_graded(workspace) / "data.csv").write_text("a,b\n")
    os.symlink("../../../gradebook.db", _graded(workspace) / "notes.txt")
    converter(coursedir=_coursedir(workspace)).init_assignment(LESSON, "mallory")
    feedback = workspace / "feedback" / "mallory" / LESSON
    if converter is GenerateFeedback:  # nbgrader copies every other file, and follows the link
        assert _tree(feedback) == {"data.csv": "a,b\n", "notes.txt": GRADEBOOK.decode()}
    else:  # the course's pages hold their figures: no file of the graded folder goes with them
        assert not feedback.exists() or _tree(feedback) == {}


@pytest.mark.parametrize("converter", [Autograde, CourseAutograde])
def test_the_graded_notebook_is_written_to_a_new_file(converter, workspace):
    os.symlink("../../../gradebook.db", _graded(workspace) / "embedding.ipynb")
    step = converter(coursedir=_coursedir(workspace))
    step.writer = FilesWriter(parent=step)
    resources = {
        "unique_key": "embedding",
        "output_extension": ".ipynb",
        "nbgrader": {"assignment": LESSON, "student": "mallory"},
    }
    step.write_single_notebook("graded", resources)
    overwritten = converter is Autograde  # nbgrader's writer opens the path through the link
    assert (workspace / "gradebook.db").read_bytes() == (b"graded" if overwritten else GRADEBOOK)
    assert (_graded(workspace) / "embedding.ipynb").read_text() == "graded"


# Kernels in the sandbox: what they leave is not kept, and the graded notebook says what

LEAVE = """
import os, socket
os.symlink("../../../gradebook.db", "gradebook.ipynb")
os.mkfifo("pipe")
socket.socket(socket.AF_UNIX).bind("sock")
with open("kept.txt", "w") as handle:
    handle.write("kept")
"""
LEFT = [
    "left a symbolic link `gradebook.ipynb` -> `../../../gradebook.db`: not kept",
    "left a FIFO `pipe`: not kept",
    "left a socket `sock`: not kept",
]


@pytest.fixture
def warm_kernels():
    yield
    zygote.shutdown()


@pytest.mark.parametrize("execute", [SandboxedExecute, zygote.WarmExecute])
def test_what_a_kernel_leaves_is_reported_in_the_graded_notebook(execute, workspace, warm_kernels):
    manager = "SandboxedKernelManager" if execute is SandboxedExecute else "WarmKernelManager"
    config = Config()
    config[manager].hidden = [str(workspace)]
    (_graded(workspace) / "embedding.ipynb").write_text("{}")
    resources = {"metadata": {"path": str(_graded(workspace))}}
    notebook = new_notebook(cells=[new_code_cell(LEAVE)])
    nb, _ = execute(config=config, timeout=60).preprocess(notebook, resources)
    assert nb.metadata[FILES_METADATA] == LEFT
    assert _tree(_graded(workspace)) == {"embedding.ipynb": "{}", "kept.txt": "kept"}
    assert (workspace / "gradebook.db").read_bytes() == GRADEBOOK
