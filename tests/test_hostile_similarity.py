"""Hostile text in the similarity report's new fields (autograder/instructor/similarity_page.py).

- The lines a pair shares are the learners' own code, shown on the page as the reason for a flag:
  a line that closes the table and opens a script is text there.
- The learners' names in a cluster come from the names of the submitted folders: one that is
  markup is refused as a student id, and were it taken in, the cluster's list would write it as text.

Each attack is shown succeeding without its defence (the page written without ``escape``, and the
folder names taken as they are), then failing with it.
"""

import random
import re

from autograder.instructor import similarity, similarity_page
from tests import similarity_class

LESSON = "10_training"
PAYLOAD = "</td></tr></table><script>alert(document.title)</script><table><tr><td>"
ESCAPED = "&lt;/td&gt;&lt;/tr&gt;&lt;/table&gt;&lt;script&gt;alert(document.title)&lt;/script&gt;"
MARKUP_NAME = "<img src=x onerror=alert(1)>"


def _without_escaping(text: str) -> str:
    return text


def _shared_sections(page: str) -> list[str]:
    """What the page writes of each pair's shared lines: from their table to the code beside it."""
    return [part.split("<div class='side'>")[0] for part in page.split("<table class='shared'>")[1:]]


def _class_with_a_hostile_copy(workspace, copier: str) -> None:
    """Six learners; one hands in lesson 10 with a line of markup (a string) at the end of every
    cell, and ``copier`` a disguised copy of it, the string kept as it is."""
    students = similarity_class.independent_class(6, seed=21)
    rng = random.Random(21)
    hostile = {e: f"{code}\nnote = {PAYLOAD!r}" for e, code in students["learner000"][LESSON].items()}
    students["learner000"] = {LESSON: hostile}
    students[copier] = {LESSON: {e: similarity_class.disguised(c, rng) for e, c in hostile.items()}}
    similarity_class.write_workspace(workspace, students)


def test_shared_lines_are_text_on_the_page(tmp_path, monkeypatch):
    _class_with_a_hostile_copy(tmp_path, "copier")
    monkeypatch.setattr(similarity_page, "escape", _without_escaping)
    report = similarity.similarity(tmp_path, [LESSON])
    pair = next(p for p in report.flagged if {p.student_a, p.student_b} == {"copier", "learner000"})
    assert any(PAYLOAD in line for side in pair.shared for line in side)
    # without the defence, the line closes the shared lines' table and a script follows it
    assert any(PAYLOAD in table for table in _shared_sections(report.page.read_text()))
    monkeypatch.undo()
    report = similarity.similarity(tmp_path, [LESSON])
    page = report.page.read_text()
    assert "<script" not in page and PAYLOAD not in page
    assert any(ESCAPED in table for table in _shared_sections(page))


def test_a_name_of_markup_is_refused_and_would_be_text_in_its_cluster(tmp_path, monkeypatch):
    _class_with_a_hostile_copy(tmp_path, MARKUP_NAME)
    # without either defence: the folder's name taken in, the page written without escaping
    monkeypatch.setattr(similarity, "STUDENT_ID", re.compile(r".+"))
    monkeypatch.setattr(similarity_page, "escape", _without_escaping)
    report = similarity.similarity(tmp_path, [LESSON])
    assert [MARKUP_NAME in cluster.students for cluster in report.clusters] == [True]
    clusters_table = report.page.read_text().split("<table class='clusters'>")[1].split("</table>")[0]
    assert f"<td>{MARKUP_NAME}, learner000</td>" in clusters_table
    # the page's escaping alone: the name is text in the cluster's list and everywhere else
    monkeypatch.undo()
    monkeypatch.setattr(similarity, "STUDENT_ID", re.compile(r".+"))
    page = similarity.similarity(tmp_path, [LESSON]).page.read_text()
    assert MARKUP_NAME not in page and "<img" not in page
    assert "<td>&lt;img src=x onerror=alert(1)&gt;, learner000</td>" in page
    # both defences: the folder is not taken in, and the report says why
    monkeypatch.undo()
    report = similarity.similarity(tmp_path, [LESSON])
    assert report.problems == [f"{MARKUP_NAME!r} / {LESSON}: not a student id (letters, digits, . _ -)"]
    assert report.clusters == [] and MARKUP_NAME not in report.page.read_text()
