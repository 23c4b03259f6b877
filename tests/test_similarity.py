"""The similarity report (autograder/instructor/similarity.py) on a generated class: planted copies
flagged, independent learners not, boilerplate never pairing anyone, flagged learners grouped into
clusters, the lines a pair shares shown without the template's, each lesson's threshold and its
measured false-positive rate on the page, learners' text inert."""

import csv
import html
import random

import nbformat
import pytest

from autograder import lessons
from autograder.instructor import similarity as module
from autograder.instructor.similarity import similarity
from autograder.instructor.similarity_pairs import Pair, bare, clusters
from autograder.instructor.similarity_threshold import MEASURED, THRESHOLD
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


def test_every_planted_copy_ranks_above_every_independent_pair_and_most_are_flagged(planted):
    """The order an instructor reads the page in puts every copy first, in each lesson (lesson 05:
    the lowest copy 0.9382 against the independent pairs' highest 0.8373; lesson 10: 0.9045 against
    0.7183). At each lesson's measured threshold (0.96 and 0.92, similarity_threshold), 8 of the 10
    copies are flagged, as the measured classes predict (55% of lesson 05's copies, 95% of lesson
    10's): the two left are those lowest copies, a person reading the list from the top finds them."""
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
    assert sum(pair in flagged for pair in planted_pairs) >= 8, sorted(set(planted_pairs) - flagged)


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
    assert not [
        pair for pair in independent if pair.flagged or pair.similarity >= report.thresholds[pair.lesson]
    ]


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
    exercises = lessons.EXERCISES["05_multi_head"]
    reference = {e: similarity_class.implementations("05_multi_head", e)[0] for e in exercises}
    monkeypatch.setattr(module, "SOURCE", tmp_path / "no-reference")
    real = module.fingerprint
    monkeypatch.setattr(module, "fingerprint", lambda code, boilerplate: real(code, set()))
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


def _pair(lesson: str, a: str, b: str, share: float) -> Pair:
    return Pair(lesson, a, b, share, share >= 0.9)


def test_a_learner_in_five_flagged_pairs_is_one_cluster():
    """The issue's class: one learner in 5 flagged pairs. They are one cluster of six learners, not
    five rows; pairs below the threshold join nobody, and each lesson has clusters of its own."""
    hub = [_pair("05_multi_head", "hub", other, 0.95 - n / 100) for n, other in enumerate("abcde")]
    pairs = [
        *hub,
        _pair("05_multi_head", "a", "b", 0.92),
        _pair("05_multi_head", "e", "x", 0.5),  # not flagged: x is in no cluster
        _pair("05_multi_head", "y", "z", 0.99),
        _pair("10_training", "hub", "a", 0.97),
    ]
    found = clusters(pairs)
    assert [(c.lesson, c.students, len(c.pairs)) for c in found] == [
        ("05_multi_head", ("y", "z"), 1),
        ("05_multi_head", ("a", "b", "c", "d", "e", "hub"), 6),
        ("10_training", ("a", "hub"), 1),
    ]
    assert found[1].highest == 0.95 and found[1].pairs[0].similarity == 0.95


def test_the_page_and_the_summary_show_each_flagged_learner_once_per_cluster(tmp_path):
    """Five copies of one learner: one cluster of six in the summary and on the page, where the
    source's name is written once in the cluster's list of learners."""
    students = similarity_class.independent_class(8, seed=4)
    rng = random.Random(4)
    source = students["learner000"]
    for number in range(5):
        students[f"copy{number}"] = {
            lesson: {exercise: similarity_class.disguised(code, rng) for exercise, code in cells.items()}
            for lesson, cells in source.items()
        }
    similarity_class.write_workspace(tmp_path, students)
    report = similarity(tmp_path, ["10_training"])
    group = ("copy0", "copy1", "copy2", "copy3", "copy4", "learner000")
    assert [cluster.students for cluster in report.clusters] == [group]
    assert sum(pair.flagged for pair in report.pairs) == len(report.clusters[0].pairs) >= 5
    assert f"10_training: {', '.join(group)} ({len(report.clusters[0].pairs)} pairs" in report.summary()
    page = report.page.read_text()
    clusters_table = page.split("<table class='clusters'>")[1].split("</table>")[0]
    assert clusters_table.count("<tr class='flagged'>") == 1
    assert clusters_table.count(f"<td>{', '.join(group)}</td>") == 1
    with report.table.open() as handle:
        rows = list(csv.DictReader(handle))
    assert {row["cluster"] for row in rows if row["flagged"] == "1"} == {"10_training:1"}
    assert all(int(row["lines_shared"]) > 0 for row in rows if row["flagged"] == "1")
    assert {row["cluster"] for row in rows if row["flagged"] == "0"} == {""}
    assert "" in {row["lines_shared"] for row in rows}  # not counted for a pair the page does not show


def _stub_lines(lesson: str) -> set[str]:
    """The lines of the released notebook's solution cells (the stubs), as the report compares them."""
    notebook = nbformat.read(lessons.course_path(lesson), as_version=4)
    return {
        bare(line)
        for cell in notebook.cells
        if cell.metadata.get("nbgrader", {}).get("solution")
        for line in cell.source.splitlines()
    } - {""}


def test_a_pair_shows_the_lines_it_shares_and_none_of_the_stubs(tmp_path, monkeypatch):
    """A disguised copy's shared lines are the learner's own code (renamed, still lined up), and no
    line of the released stubs: with the template's lines not set aside, the stub's signatures and
    docstrings were counted as shared."""
    lesson = "05_multi_head"
    students = similarity_class.independent_class(6, seed=11)
    rng = random.Random(11)
    # the reference's cells keep the stub's signature and docstring lines
    source = {e: similarity_class.implementations(lesson, e)[0] for e in lessons.EXERCISES[lesson]}
    students["learner000"][lesson] = {e: similarity_class.in_own_style(c, [], rng) for e, c in source.items()}
    students["copier"] = {
        lesson: {e: similarity_class.disguised(c, rng) for e, c in students["learner000"][lesson].items()}
    }
    similarity_class.write_workspace(tmp_path, students)
    stubs = _stub_lines(lesson)

    def copy_pair(report) -> Pair:
        return next(p for p in report.pairs if {p.student_a, p.student_b} == {"copier", "learner000"})

    monkeypatch.setattr(module, "bare", lambda line: "not a line of any code")  # no template lines
    without = copy_pair(similarity(tmp_path, [lesson]))
    assert {bare(line) for side in without.shared for line in side} & stubs
    monkeypatch.undo()
    pair = copy_pair(similarity(tmp_path, [lesson]))
    assert pair.flagged and len(pair.shared) >= 5, pair
    assert not {bare(line) for side in pair.shared for line in side} & stubs
    assert any(a != b for a, b in pair.shared)  # renamed, and still lined up
    page = (tmp_path / "similarity" / "index.html").read_text()
    assert f"{len(pair.shared)} line(s) shared that the released notebook and the reference do not" in page


def test_each_lesson_states_its_threshold_and_false_positive_rate(tmp_path):
    similarity_class.write_workspace(tmp_path, similarity_class.independent_class(4, seed=2))
    report = similarity(tmp_path)
    page = report.page.read_text()
    for lesson in similarity_class.LESSONS:
        measured = MEASURED[lesson]
        assert report.thresholds[lesson] == measured.threshold
        rate = report.rates[lesson]
        assert f"Flagged from {measured.threshold:.2f}. In {measured.draws} generated classes of 200" in rate
        assert f"{measured.independent_at[measured.threshold]:,} of {measured.independent_pairs:,}" in rate
        assert "about 0.0 false flags among this lesson's 6 pairs" in rate and html.escape(rate) in page
        assert rate in report.summary()
    chosen = similarity(tmp_path, ["10_training"], threshold=0.93)
    assert "Flagged from 0.93." in chosen.rates["10_training"]
    assert "reached 0.92 (at most as many reach it)" in chosen.rates["10_training"]
    assert chosen.thresholds == {"10_training": 0.93}


def test_a_lesson_not_measured_says_so(tmp_path):
    lesson = "01_embedding"
    (tmp_path / "release" / lesson).mkdir(parents=True)
    notebook = lessons.notebook_name(lesson)
    (tmp_path / "release" / lesson / notebook).write_bytes(lessons.course_path(lesson).read_bytes())
    report = similarity(tmp_path, [lesson])
    assert report.thresholds == {lesson: THRESHOLD}
    assert "This lesson was not measured" in report.rates[lesson]
    assert "is not known" in report.page.read_text()
    assert f"  {lesson}: flagged from 0.90; not measured, so how often" in report.summary()
