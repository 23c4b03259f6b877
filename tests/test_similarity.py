"""The similarity report (autograder/instructor/similarity.py) on a generated class: planted copies
flagged, independent learners not, boilerplate never pairing anyone, learners' text inert."""

import csv
import random

import nbformat
import pytest

from autograder import lessons
from autograder.instructor.similarity import THRESHOLD, similarity
from tests import similarity_class

PAYLOAD = "</pre><script>alert('similar')</script>"


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    """24 independent learners, and 5 copiers each with a disguised copy of one of them."""
    workspace = tmp_path_factory.mktemp("class")
    students = similarity_class.independent_class(24, seed=0)
    rng = random.Random(100)
    copies = {}
    for victim in rng.sample(sorted(students), 5):
        copier = victim.replace("learner", "copier")
        students[copier] = {
            lesson: {exercise: similarity_class.disguised(code, rng) for exercise, code in cells.items()}
            for lesson, cells in students[victim].items()
        }
        copies[copier] = victim
    similarity_class.write_workspace(workspace, students)
    return workspace, copies, similarity(workspace)


def _is_copy(pair, copies: dict[str, str]) -> bool:
    return copies.get(pair.student_a) == pair.student_b or copies.get(pair.student_b) == pair.student_a


def test_every_planted_copy_ranks_above_every_independent_pair_and_nearly_all_are_flagged(planted):
    """The order an instructor reads the page in puts every copy first, in each lesson; at the
    threshold, 9 of the 10 copies are flagged. The tenth (lesson 05, where the exercises are
    short and learners' code alike) scored 0.8904 against the independent pairs' highest 0.8797,
    below the 0.9 threshold, once lesson 10's alternatives (which the class draws from) grew."""
    _, copies, report = planted
    for lesson in similarity_class.LESSONS:
        pairs = [pair for pair in report.pairs if pair.lesson == lesson]
        lowest_copy = min(pair.similarity for pair in pairs if _is_copy(pair, copies))
        highest_independent = max(pair.similarity for pair in pairs if not _is_copy(pair, copies))
        assert lowest_copy > highest_independent, (lesson, lowest_copy, highest_independent)
    flagged = {(pair.lesson, pair.student_a, pair.student_b) for pair in report.flagged}
    planted_pairs = [
        (lesson, *sorted([victim, copier]))
        for copier, victim in copies.items()
        for lesson in similarity_class.LESSONS
    ]
    assert sum(pair in flagged for pair in planted_pairs) >= 9, sorted(set(planted_pairs) - flagged)


def test_no_independent_pair_reaches_the_threshold(planted):
    _, copies, report = planted
    independent = [
        pair
        for pair in report.pairs
        if copies.get(pair.student_a) != pair.student_b
        and copies.get(pair.student_b) != pair.student_a
        and not {pair.student_a, pair.student_b} <= {*copies, *copies.values()}
    ]
    assert len(independent) > 2 * 24 * 23 / 2 * 0.9  # nearly every pair of the class was compared
    assert max(pair.similarity for pair in independent) < THRESHOLD
    assert not [pair for pair in independent if pair.flagged]


def test_the_table_and_the_page_hold_the_pairs(planted):
    workspace, copies, report = planted
    assert report.table == workspace / "similarity" / "similarity.csv"
    with report.table.open() as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == len(report.pairs) == 2 * 29 * 28 // 2
    assert sum(row["flagged"] == "1" for row in rows) == len(report.flagged)
    page = report.page.read_text()
    assert "Content-Security-Policy" in page and "script-src" not in page and "default-src 'none'" in page
    for copier, victim in copies.items():
        assert copier in page and victim in page
    assert page.count("<mark>") > 10


def _class_with(tmp_path, extra: dict[str, dict[str, str]]):
    """Ten independent learners of lesson 05, and the extra learners' cells for it."""
    students = similarity_class.independent_class(10, seed=3)
    similarity_class.write_workspace(tmp_path, students)
    for student, cells in extra.items():
        similarity_class.write_submission(tmp_path, student, "05_multi_head", cells)
    return similarity(tmp_path, ["05_multi_head"])


def test_the_stub_and_the_reference_pair_nobody(tmp_path):
    exercises = lessons.EXERCISES["05_multi_head"]
    reference = {e: similarity_class.implementations("05_multi_head", e)[0] for e in exercises}
    report = _class_with(tmp_path, {"stubby": {}, "refcopy": reference, "refcopy2": dict(reference)})
    # the two who handed in the reference are alike only through it: boilerplate, not matched
    for pair in report.pairs:
        if {"stubby", "refcopy", "refcopy2"} & {pair.student_a, pair.student_b}:
            assert pair.similarity == 0, pair


def test_without_boilerplate_the_reference_would_pair_them(tmp_path, monkeypatch):
    """The defence's counterpart: the same two learners, the boilerplate switched off, are 100% alike."""
    from autograder.instructor import similarity as module

    exercises = lessons.EXERCISES["05_multi_head"]
    reference = {e: similarity_class.implementations("05_multi_head", e)[0] for e in exercises}
    monkeypatch.setattr(module, "SOURCE", tmp_path / "no-reference")
    real = module._fingerprint
    monkeypatch.setattr(module, "_fingerprint", lambda code, boilerplate: real(code, set()))
    report = _class_with(tmp_path, {"refcopy": reference, "refcopy2": dict(reference)})
    pair = next(p for p in report.pairs if {p.student_a, p.student_b} == {"refcopy", "refcopy2"})
    assert pair.similarity == 1.0 and pair.flagged


def test_hostile_code_is_inert_on_the_page(tmp_path):
    victim = similarity_class.independent_class(1, seed=9)["learner000"]["05_multi_head"]
    hostile = {exercise: f"{code}\n# {PAYLOAD}\nx = '{PAYLOAD}'" for exercise, code in victim.items()}
    report = _class_with(tmp_path, {"evil.a": hostile, "evil.b": dict(hostile)})
    page = report.page.read_text()
    assert any({p.student_a, p.student_b} == {"evil.a", "evil.b"} and p.flagged for p in report.pairs)
    # the payload is in both learners' code, which the page shows; raw, it would close the <pre>
    assert PAYLOAD in hostile["MultiHeadAttention"]
    assert PAYLOAD not in page and "<script" not in page
    assert "&lt;/pre&gt;&lt;script&gt;alert(&#x27;similar&#x27;)&lt;/script&gt;" in page


def test_added_cells_are_read_inert_and_broken_notebooks_cost_only_themselves(tmp_path):
    """A cell the learner added is compared whatever its metadata claims (here a solution under a
    grade_id the release lacks), and the page shows it as text; a notebook that is not JSON is
    reported and costs only itself."""
    students = similarity_class.independent_class(4, seed=5)
    similarity_class.write_workspace(tmp_path, students)
    path = tmp_path / "submitted" / "learner000" / "05_multi_head" / lessons.notebook_name("05_multi_head")
    notebook = nbformat.read(path, as_version=4)
    extra = nbformat.v4.new_code_cell(PAYLOAD, metadata={"nbgrader": {"solution": True, "grade_id": "mine"}})
    notebook.cells.append(extra)
    nbformat.write(notebook, path)
    broken = tmp_path / "submitted" / "learner001" / "10_training" / lessons.notebook_name("10_training")
    broken.write_text("{ not json")
    report = similarity(tmp_path)
    page = report.page.read_text()
    assert PAYLOAD not in page and "<script" not in page
    assert "&lt;/pre&gt;&lt;script&gt;alert(&#x27;similar&#x27;)&lt;/script&gt;" in page  # read, as text
    assert report.problems == [
        "learner001 / 10_training: training.ipynb is not a readable notebook (NotJSONError)"
    ]
    assert sum(p.lesson == "10_training" for p in report.pairs) == 3  # learner001 left out there only
    assert sum(p.lesson == "05_multi_head" for p in report.pairs) == 6


def test_a_lesson_not_released_is_a_clear_error(tmp_path):
    similarity_class.write_workspace(tmp_path, {})
    with pytest.raises(
        ValueError, match="'03_attention' is not a released lesson.*05_multi_head, 10_training"
    ):
        similarity(tmp_path, ["03_attention"])
    with pytest.raises(ValueError, match="threshold"):
        similarity(tmp_path, threshold=1.5)


def test_lesson_12s_reference_cpp_pairs_nobody(tmp_path):
    """Lesson 12's solution markers sit inside the C++ string, where the tokenizer keeps them: two
    learners who hand in the reference's C++ (the sample ada's) are boilerplate, not a pair."""
    lesson = "12_libtorch"
    notebook = lessons.notebook_name(lesson)
    (tmp_path / "release" / lesson).mkdir(parents=True)
    (tmp_path / "release" / lesson / notebook).write_bytes(lessons.course_path(lesson).read_bytes())
    handed_in = lessons.ROOT / "autograder" / "sample_submissions" / "ada" / lesson / notebook
    for student in ("ann", "bob"):
        (tmp_path / "submitted" / student / lesson).mkdir(parents=True)
        (tmp_path / "submitted" / student / lesson / notebook).write_bytes(handed_in.read_bytes())
    # each learner's cells are the reference's as handed in: nothing of their own is left to pair
    # them by (with the markers kept in the boilerplate, they were a pair at 1.0, flagged)
    assert all(pair.similarity < 0.1 and not pair.flagged for pair in similarity(tmp_path, [lesson]).pairs)
