"""The hostile class (tests/hostile_class.py): what a kernel leaves in its folder.

Links, FIFOs, floods of files, sparse files and second names of the notebook come back as
regular files and folders within the caps, or not at all; nothing a link points to is read,
changed or copied into feedback, and no page made from a submission runs its scripts.
"""

import re
import sqlite3
import stat

import nbformat

from autograder import lessons
from autograder.engine.submission_files import Caps
from tests.hostile_class import EARNED, LEFT_BEHIND, LESSON, VICTIM, graded_folder, outputs


def test_only_regular_files_and_folders_come_back_from_a_kernel(graded_hostile_class):
    workspace = graded_hostile_class["pipeline"].workspace
    kinds = {
        str(path.relative_to(workspace)): stat.S_IFMT(path.lstat().st_mode)
        for folder in ("autograded", "feedback")
        for path in (workspace / folder).rglob("*")
    }
    odd = {path for path, kind in kinds.items() if kind not in (stat.S_IFREG, stat.S_IFDIR)}
    assert odd == set(), odd
    for student in LEFT_BEHIND:  # the graded notebook is a notebook, wherever the kernel's link pointed
        nbformat.validate(
            nbformat.read(
                graded_folder(graded_hostile_class["pipeline"], student) / lessons.notebook_name(LESSON), 4
            )
        )


def test_the_gradebook_and_the_instructors_files_are_untouched_by_links(graded_hostile_class):
    with sqlite3.connect(
        graded_hostile_class["pipeline"].workspace / "gradebook.db"
    ) as db:  # still the gradebook
        assert db.execute("SELECT count(*) FROM submitted_assignment").fetchone()[0] == len(EARNED) + 2
    assert graded_hostile_class["grades"].count(f",{LESSON},") == len(EARNED) + 2  # export reads every grade
    assert stat.S_IMODE(VICTIM.stat().st_mode) == 0o751 and VICTIM.read_text() == "the instructor's script"


def test_feedback_never_copies_what_a_link_points_to(graded_hostile_class):
    feedback = graded_hostile_class["pipeline"].workspace / "feedback"
    copied = [path for path in feedback.rglob("*") if path.is_file() and path.suffix != ".html"]
    assert copied == [], copied
    for page in graded_hostile_class["feedback"]:
        assert not page.read_bytes().startswith(b"SQLite format 3")


def test_what_a_submission_leaves_on_disk_is_capped(graded_hostile_class):
    flooded = graded_folder(graded_hostile_class["pipeline"], "flooder")
    assert len(list(flooded.rglob("*"))) <= Caps().files
    allocated = sum(
        p.lstat().st_blocks * 512
        for p in graded_folder(graded_hostile_class["pipeline"], "sparse_writer").rglob("*")
    )
    assert allocated < 2**20, allocated  # the sparse GiB was not kept, densely or at all
    assert not (graded_folder(graded_hostile_class["pipeline"], "sparse_writer") / "big.bin").exists()


def test_a_notebook_a_kernel_leaves_is_not_graded_as_the_submissions(graded_hostile_class):
    """hard_linker left twin.ipynb, a second name of its notebook: a copy comes back, and
    feedback is written for the notebook handed in only."""
    folder = graded_folder(graded_hostile_class["pipeline"], "hard_linker")
    assert (folder / "twin.ipynb").is_file() and (folder / "twin.ipynb").stat().st_nlink == 1
    pages = sorted(p.name for p in graded_hostile_class["feedback"] if p.parent.parent.name == "hard_linker")
    assert pages == ["embedding.html"]
    assert "hard link refused: OSError" in outputs(graded_hostile_class["pipeline"], "hard_linker")


def _scripts(html: str) -> list[str]:
    """The tags of a page that would run something: script elements, on* handlers, javascript: URLs."""
    tags = r"<script\b[^>]*>|<[a-z][^>]*\son[a-z]+\s*=[^>]*>|<[a-z][^>]*=\s*[\"']?\s*javascript:[^>]*>"
    return re.findall(tags, html, re.IGNORECASE)


def test_a_page_made_from_a_submission_runs_nothing_of_it(graded_hostile_class):
    nb = nbformat.read(
        graded_folder(graded_hostile_class["pipeline"], "scripter") / lessons.notebook_name(LESSON), 4
    )
    outputs = [output for cell in nb.cells for output in cell.get("outputs", [])]
    shown = [output for output in outputs if output.get("output_type") == "display_data"]
    assert shown and all("application/javascript" not in output.get("data", {}) for output in outputs)
    assert "<b>hi</b>" in shown[0].data["text/html"]  # the harmless part stays
    assert _scripts(shown[0].data["text/html"]) == []
    page = next(p for p in graded_hostile_class["feedback"] if p.parent.parent.name == "scripter").read_text()
    assert _scripts(page) == [] and "<b>hi</b>" in page
