"""The class insights (autograder/instructor/insights.py) equal what the class did.

First from verdict files written here by hand, where every number is known: pass rates, learners
per catalogued mistake (a learner counts once), the visible-only learners, the scores and the
failed gradings, in the page and in the CSV. Then from a class graded by the pipeline whose
mistakes were planted: the bundled samples of lessons 01 and 03 and learners made from the
reference solution with one known mistake each (as autograder/authoring/samples.py makes ben's),
among them one whose answer is right only for the sizes the visible checks use, and cho's
untouched stubs, which count as not attempted. Between the two: the catalogue's hints, the
failures no mistake names, one lesson's page alone, and the gradebook's manual scores.
"""

import base64
import csv
import json
import re
import shutil
from dataclasses import asdict
from html.parser import HTMLParser
from pathlib import Path

import nbformat
import pytest

from autograder import lessons
from autograder.authoring.samples import SAMPLES, filled
from autograder.engine import verdicts
from autograder.engine.verdicts import CellVerdict, Verdict
from autograder.hidden.core import SEED_VARIABLE
from autograder.instructor import insights_page
from autograder.instructor.insights import COLUMNS, insights, read_class
from autograder.instructor.insights_data import CellRate, ManualScore

LESSON = "03_attention"
HOSTILE = '<script>alert("x")</script> & <b>bold</b>'  # a mistake's name, as a catalogue could hold it


def _cell(exercise, points, most, visible=None, hidden=None, mistakes=()):
    return CellVerdict(exercise, points, most, visible, hidden, list(mistakes))


def _write(workspace: Path, verdict: Verdict) -> None:
    path = verdicts.path(workspace, verdict.lesson, verdict.student)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(asdict(verdict)))


def _verdict(student, cells, failure=None, lesson=LESSON):
    score = sum(cell.points for cell in cells.values())
    most = sum(cell.max_points for cell in cells.values()) if cells else 6.0
    return Verdict(lesson, student, "2026-12-01T10:00:00+00:00", score, most, failure, cells)


def synthetic_class(workspace: Path) -> None:
    """Five learners of lesson 03 (one whose grading failed) and two of lesson 01."""
    a, f = "attend", "fold"
    _write(workspace, _verdict("amy", {
        "test_attend_shapes": _cell(a, 1, 1, True), "test_attend_values": _cell(a, 2, 2, True, True),
        "test_fold": _cell(f, 3, 3, True, True)}))  # fmt: skip
    _write(workspace, _verdict("bob", {
        "test_attend_shapes": _cell(a, 1, 1, True),
        "test_attend_values": _cell(a, 0, 2, False, None, ["no scaling"]),
        "test_fold": _cell(f, 0, 3, False, None, ["no scaling", HOSTILE])}))  # fmt: skip
    _write(workspace, _verdict("cat", {
        "test_attend_shapes": _cell(a, 0, 1, False, None, ["no scaling"]),
        "test_attend_values": _cell(a, 0, 2, False, None, ["no scaling", "=SUM(A1)"]),
        "test_fold": _cell(f, 0, 3, True, False)}))  # fmt: skip
    _write(workspace, _verdict("dan", {}, failure="the notebook is not valid JSON"))
    _write(workspace, _verdict("eve", {
        "test_attend_shapes": _cell(a, 1, 1, True),
        "test_attend_values": _cell(a, 0, 2, True, False, ["softmax over the wrong dimension"]),
        "test_fold": _cell(f, 1.5, 3, True, False)}))  # fmt: skip
    for student, points in (("amy", 3.0), ("bob", 1.0)):
        cells = {"test_Embedding_values": _cell("Embedding", points, 3, points == 3, None)}
        _write(workspace, _verdict(student, cells, lesson="01_embedding"))


@pytest.fixture
def synthetic(tmp_path):
    synthetic_class(tmp_path)
    return tmp_path


def test_every_number_of_a_class_written_by_hand(synthetic):
    embedding, attention = read_class(synthetic)

    assert embedding.lesson == "01_embedding"
    assert embedding.cells == [CellRate("test_Embedding_values", "Embedding", 1, 2)]
    assert attention.cells == [
        CellRate("test_attend_shapes", "attend", 3, 4),
        CellRate("test_attend_values", "attend", 1, 4),
        CellRate("test_fold", "fold", 1, 4),  # eve's 1.5 of 3 is not a pass
    ]
    assert [cell.rate for cell in attention.cells] == [0.75, 0.25, 0.25]
    # cat's three cells name "no scaling" once for the exercise; bob's "fold" counts apart
    assert attention.mistakes == {
        "attend": {
            "=SUM(A1)": ["cat"],
            "no scaling": ["bob", "cat"],
            "softmax over the wrong dimension": ["eve"],
        },
        "fold": {HOSTILE: ["bob"], "no scaling": ["bob"]},
    }
    assert attention.mistake_counts()[0] == ("attend", "no scaling", 2)
    assert attention.visible_only == {
        "attend": {"eve": ["test_attend_values"]},
        "fold": {"cat": ["test_fold"], "eve": ["test_fold"]},
    }
    assert attention.scores == {"amy": (6, 6), "bob": (1, 6), "cat": (0, 6), "eve": (2.5, 6)}
    assert attention.failed == {"dan": "the notebook is not valid JSON"}
    assert attention.graded == 4


def _csv(folder: Path) -> list[dict[str, str]]:
    with (folder / "insights.csv").open(newline="", encoding="utf-8") as file:
        reader = csv.DictReader(file)
        assert tuple(reader.fieldnames) == COLUMNS
        return list(reader)


def test_the_csv_holds_every_number_a_row_each(synthetic):
    insights(synthetic)
    rows = [row for row in _csv(synthetic / "insights") if row["lesson"] == LESSON]

    def kind(name):
        return [(r["exercise"], r["item"], r["value"], r["out_of"], r["share"], r["students"], r["note"])
                for r in rows if r["kind"] == name]  # fmt: skip

    assert kind("cell pass rate") == [
        ("attend", "test_attend_shapes", "3", "4", "0.7500", "", ""),
        ("attend", "test_attend_values", "1", "4", "0.2500", "", ""),
        ("fold", "test_fold", "1", "4", "0.2500", "", ""),
    ]
    assert kind("mistake") == [
        ("attend", "no scaling", "2", "4", "0.5000", "bob; cat", ""),
        ("attend", "'=SUM(A1)", "1", "4", "0.2500", "cat", ""),  # shown as text, never run as a formula
        ("attend", "softmax over the wrong dimension", "1", "4", "0.2500", "eve", ""),
        ("fold", HOSTILE, "1", "4", "0.2500", "bob", ""),
        ("fold", "no scaling", "1", "4", "0.2500", "bob", ""),
    ]
    assert kind("visible only") == [
        ("attend", "test_attend_values", "1", "4", "0.2500", "eve", ""),
        ("fold", "test_fold", "2", "4", "0.5000", "cat; eve", ""),
    ]
    assert kind("score") == [
        ("", "amy", "6", "6", "1.0000", "", ""),
        ("", "bob", "1", "6", "0.1667", "", ""),
        ("", "cat", "0", "6", "0.0000", "", ""),
        ("", "eve", "2.5", "6", "0.4167", "", ""),
    ]
    assert kind("failed grading") == [("", "dan", "", "", "", "", "the notebook is not valid JSON")]


class _Elements(HTMLParser):
    """The page's elements, the text of its table cells, and its images' sources."""

    def __init__(self, page: str):
        super().__init__()
        self.tags, self.cells, self.images, self._in_cell = [], [], [], False
        self.feed(page)

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        if tag == "td":
            self._in_cell = True
            self.cells.append("")
        if tag == "img":
            self.images.append(dict(attrs)["src"])

    def handle_endtag(self, tag):
        self._in_cell = self._in_cell and tag != "td"

    def handle_data(self, data):
        if self._in_cell:
            self.cells[-1] += data


def test_the_page_is_offline_and_shows_names_as_text(synthetic, monkeypatch):
    page = insights(synthetic).read_text()
    found = _Elements(page)

    assert page == (synthetic / "insights" / "index.html").read_text()
    assert 'http-equiv="Content-Security-Policy"' in page and "default-src 'none'" in page
    assert "script" not in found.tags and "b" not in found.tags
    assert HOSTILE in found.cells  # the name, as text
    assert "http:" not in page and "https:" not in page
    # a scores histogram per lesson, and a mistakes chart for lesson 03 (01's checks named none)
    assert len(found.images) == 3
    assert "No check named a catalogued mistake." in page
    for source in found.images:
        assert source.startswith("data:image/png;base64,")
        assert base64.b64decode(source.removeprefix("data:image/png;base64,")).startswith(b"\x89PNG")
    assert "the notebook is not valid JSON" in page
    # without the escaping, the catalogue's name would be markup that runs
    monkeypatch.setattr(insights_page, "_e", str)
    assert "script" in _Elements(insights(synthetic).read_text()).tags


def test_no_verdicts_or_a_broken_one_says_what_was_expected(tmp_path):
    with pytest.raises(FileNotFoundError, match="grade the class first"):
        insights(tmp_path)
    synthetic_class(tmp_path)
    broken = verdicts.path(tmp_path, LESSON, "fay")
    broken.write_text('{"lesson": "03_attention"')
    with pytest.raises(ValueError, match=f"{re.escape(str(broken))} is not a verdict file"):
        insights(tmp_path)
    assert broken.read_text() == '{"lesson": "03_attention"'  # nothing lost
    assert not (tmp_path / "insights").exists()


ATTENTION, NO_SCALING = "scaled_dot_product_attention", "no scaling"
HINT = "The scores are not scaled: divide q kᵀ by sqrt(d_k) before the softmax."


def teaching_class(workspace: Path) -> None:
    """Lesson 03 with the catalogue's own names: ann's checks name a mistake, bea's code fails with
    none named, cid's stub still raises NotImplementedError in both cells; lesson 01 for ann."""
    values, shapes = f"test_{ATTENTION}_values", f"test_{ATTENTION}_shapes"
    named = _cell(ATTENTION, 0, 2, False, None, [NO_SCALING])
    _write(workspace, _verdict("ann", {shapes: _cell(ATTENTION, 1, 1, True), values: named}))
    _write(workspace, _verdict("bea", {
        shapes: _cell(ATTENTION, 0, 1, False), values: _cell(ATTENTION, 0, 2, False)}))  # fmt: skip
    _write(workspace, _verdict("cid", {
        shapes: CellVerdict(ATTENTION, 0, 1, False, None, [], unwritten=True),
        values: CellVerdict(ATTENTION, 0, 2, False, None, [], unwritten=True)}))  # fmt: skip
    _write(
        workspace,
        _verdict("ann", {"test_Embedding_values": _cell("Embedding", 3, 3, True)}, lesson="01_embedding"),
    )


def test_the_hint_beside_each_mistake_and_a_row_per_cell_for_what_no_mistake_explains(tmp_path):
    teaching_class(tmp_path)
    page = insights(tmp_path).read_text()
    rows = [row for row in _csv(tmp_path / "insights") if row["lesson"] == LESSON]

    [mistake] = [r for r in rows if r["kind"] == "mistake"]
    assert (mistake["item"], mistake["students"], mistake["hint"]) == (NO_SCALING, "ann", HINT)
    by_cell = {(r["kind"], r["item"]): (r["value"], r["out_of"], r["students"]) for r in rows}
    values, shapes = f"test_{ATTENTION}_values", f"test_{ATTENTION}_shapes"
    assert by_cell["not attempted", shapes] == by_cell["not attempted", values] == ("1", "3", "cid")
    assert by_cell["no named mistake", shapes] == ("1", "3", "bea")  # ann passed it
    assert by_cell["no named mistake", values] == ("1", "3", "bea")  # ann's failure has a name
    cells = _Elements(page).cells
    assert cells[cells.index(NO_SCALING) + 2] == HINT  # beside the mistake, after its count
    assert "1: cid" in cells and "1: bea" in cells


def test_an_old_verdict_file_without_the_stub_record_reads_as_attempted(tmp_path):
    """Verdicts written before grading recorded stubs have no 'unwritten': no cell is claimed
    not attempted on their account."""
    teaching_class(tmp_path)
    file = verdicts.path(tmp_path, LESSON, "cid")
    data = json.loads(file.read_text())
    for cell in data["cells"].values():
        del cell["unwritten"]
    file.write_text(json.dumps(data))
    (attention,) = read_class(tmp_path, LESSON)
    assert attention.unwritten == {} and attention.unexplained[f"test_{ATTENTION}_shapes"] == ["bea", "cid"]


def test_one_lesson_gets_a_page_and_a_table_of_its_own(tmp_path):
    teaching_class(tmp_path)
    page = insights(tmp_path, lesson=LESSON)
    assert page == tmp_path / "insights" / LESSON / "index.html"
    assert {row["lesson"] for row in _csv(page.parent)} == {LESSON}
    text = page.read_text()
    assert f'id="{LESSON}"' in text and 'id="01_embedding"' not in text
    with pytest.raises(ValueError, match="'3_attention' is no lesson; expected one of 01_embedding"):
        insights(tmp_path, lesson="3_attention")
    with pytest.raises(FileNotFoundError, match=r"no verdict files of 05_multi_head \(lessons with verdicts: "
                       r"01_embedding, 03_attention\)"):  # fmt: skip
        insights(tmp_path, lesson="05_multi_head")


def test_the_command_line_writes_one_lesson_and_says_what_was_expected(tmp_path, capsys):
    from autograder.__main__ import main

    teaching_class(tmp_path)
    assert main(["--workspace", str(tmp_path), "insights", "--lesson", LESSON]) == 0
    folder = tmp_path / "insights" / LESSON
    assert capsys.readouterr().out.split() == [str(folder / "index.html"), str(folder / "insights.csv")]
    assert main(["--workspace", str(tmp_path), "insights", "--lesson", "attention"]) == 2
    assert "error: --lesson 'attention' is no lesson; expected one of" in capsys.readouterr().err


def test_manual_scores_in_the_gradebook_reach_the_csv_and_the_page(tmp_path):
    """A grader gave bea 1.5 of 2 by hand in the Formgrader: the gradebook holds it, and the
    insights show it beside the autograded 0; a workspace without a gradebook gets none made."""
    from nbgrader.api import Gradebook

    from autograder.engine.nbgrader_config import COURSE_ID
    from autograder.engine.workspace import sqlite_url

    teaching_class(tmp_path)
    insights(tmp_path)
    assert not (tmp_path / "gradebook.db").exists()
    notebook, values = "attention", f"test_{ATTENTION}_values"
    with Gradebook(sqlite_url(tmp_path), course_id=COURSE_ID) as gradebook:
        gradebook.add_assignment(LESSON)
        gradebook.add_notebook(notebook, LESSON)
        gradebook.add_grade_cell(values, notebook, LESSON, max_score=2, cell_type="code")
        for student in ("bea", "zed"):  # zed has no verdict: not in the insights
            gradebook.add_student(student)
            gradebook.add_submission(LESSON, student)
            grade = gradebook.find_grade(values, notebook, LESSON, student)
            grade.auto_score, grade.manual_score = 0.0, 1.5
        gradebook.db.commit()
    (attention,) = read_class(tmp_path, LESSON)
    assert attention.manual == [ManualScore("bea", values, ATTENTION, 1.5, 2.0, 0.0)]
    page = insights(tmp_path).read_text()
    [row] = [r for r in _csv(tmp_path / "insights") if r["kind"] == "manual score"]
    assert (row["lesson"], row["exercise"], row["item"], row["value"], row["out_of"], row["note"]) == (
        LESSON, ATTENTION, "bea", "1.5", "2", f"{values} (autograded 0)"
    )  # fmt: skip
    assert "Scored by hand" in page and "1.5 of 2" in _Elements(page).cells


# A class graded by the pipeline. Lesson 03: learner -> (the edits to the reference's code, the
# test cells it passes, the catalogued mistakes it hits); ada, ben and cho are the bundled samples.
SDPA = "scaled_dot_product_attention"
SHAPES, VALUES, MASK, FULLY = (f"test_{SDPA}_{name}" for name in ("shapes", "values", "mask", "fully_masked"))
PLANTED = {
    "ada": (None, {SHAPES, VALUES, MASK, FULLY}, set()),
    "ben": (None, {SHAPES}, {"no scaling"}),
    "cho": (None, set(), set()),
    "learner-dk": ([(SDPA, "/ math.sqrt(d_k)", "/ d_k")], {SHAPES}, {"scaled by d_k instead of sqrt(d_k)"}),
    "learner-dim": (
        [(SDPA, "torch.softmax(scores, dim=-1)", "torch.softmax(scores, dim=-2)")],
        {SHAPES},
        {"softmax over the wrong dimension"},
    ),
    "learner-inverted": (
        [
            (SDPA, 'scores.masked_fill(~mask, float("-inf"))', 'scores.masked_fill(mask, float("-inf"))'),
            (SDPA, "weights.masked_fill(~mask, 0.0)", "weights.masked_fill(mask, 0.0)"),
        ],
        {SHAPES, VALUES},
        {"inverted mask"},
    ),
    # the hidden mask tests have a query with no key to attend to; the visible mask check has none
    "learner-nan": (
        [(SDPA, "weights = weights.masked_fill(~mask, 0.0)", "pass")],
        {SHAPES, VALUES},
        {"NaN on a fully masked row"},
    ),
    # right for the visible checks' sizes (T_q=5, T_k=7, d_k=4) only, else unscaled: the hidden
    # tests' fresh sizes find it, and name the mistake they see
    "learner-fitted": (
        [(SDPA, "/ math.sqrt(d_k)", "/ (2.0 if (q.size(-2), k.size(-2), d_k) == (5, 7, 4) else 1.0)")],
        {SHAPES},
        {"no scaling"},
    ),
}
VISIBLE_ONLY = {"learner-fitted": [VALUES, MASK, FULLY], "learner-nan": [MASK]}
EMBEDDING_PLANTED = {
    "ada": (None, {"test_Embedding_shapes", "test_Embedding_values"}, set()),
    "ben": (None, {"test_Embedding_shapes"}, {"no sqrt(d_model) scale"}),
    "cho": (None, set(), set()),
    "learner-dmodel": (
        [("Embedding", "* math.sqrt(self.d_model)", "* self.d_model")],
        {"test_Embedding_shapes"},
        {"scaled by d_model instead of sqrt(d_model)"},
    ),
}
CLASS = {"01_embedding": EMBEDDING_PLANTED, LESSON: PLANTED}


@pytest.fixture(scope="module")
def graded_class(tmp_path_factory):
    """The class above, graded in a workspace of its own (13 notebooks, about half a minute)."""
    from autograder.engine.pipeline import Pipeline

    root = tmp_path_factory.mktemp("class")
    inbox = root / "inbox"
    for lesson, planted in CLASS.items():
        for student, (edits, _, _) in planted.items():
            target = inbox / student / lesson
            if edits is None:
                shutil.copytree(SAMPLES / student / lesson, target)
            else:
                target.mkdir(parents=True)
                nbformat.write(filled(lesson, edits), target / lessons.notebook_name(lesson))
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(SEED_VARIABLE, "2024")  # the hidden tests' sizes, the same on every run
        pipeline = Pipeline(root / "workspace")
        pipeline.release(list(CLASS))
        pipeline.collect_folder(inbox)
        pipeline.autograde(1)
    return root / "workspace"


@pytest.mark.parametrize("lesson", list(CLASS))
def test_a_graded_class_shows_the_mistakes_planted(graded_class, lesson):
    planted = CLASS[lesson]
    (found,) = [found for found in read_class(graded_class) if found.lesson == lesson]

    expected_mistakes: dict[str, list[str]] = {}
    for student, (_, _, mistakes) in planted.items():
        for mistake in mistakes:
            expected_mistakes.setdefault(mistake, []).append(student)
    exercise = lessons.EXERCISES[lesson][0]
    assert found.mistakes == {exercise: {m: sorted(s) for m, s in sorted(expected_mistakes.items())}}
    assert found.failed == {}
    assert sorted(found.scores) == sorted(planted)
    for cell in found.cells:
        passing = [student for student, (_, passes, _) in planted.items() if cell.grade_id in passes]
        assert (cell.grade_id, cell.passed, cell.graded) == (cell.grade_id, len(passing), len(planted))
    assert {cell.grade_id for cell in found.cells} == set().union(
        *(passes for _, passes, _ in planted.values())
    )
    assert found.visible_only == ({SDPA: VISIBLE_ONLY} if lesson == LESSON else {})
    # cho handed in the untouched stubs: every cell not attempted, cho in no other count
    assert found.unwritten == {cell.grade_id: ["cho"] for cell in found.cells}
    assert not any("cho" in students for students in found.unexplained.values())
    assert all(found.hints[key] for key in found.hints)  # every mistake named has its hint


def test_a_graded_class_reads_the_same_in_the_csv(graded_class, tmp_path):
    page = insights(graded_class, tmp_path)
    rows = _csv(tmp_path)
    mistakes = {(r["lesson"], r["item"]): (r["value"], r["students"]) for r in rows if r["kind"] == "mistake"}
    fitted = [(r["lesson"], r["exercise"], r["students"]) for r in rows if r["kind"] == "visible only"]

    assert page == tmp_path / "index.html"
    assert mistakes[(LESSON, "no scaling")] == ("2", "ben; learner-fitted")
    assert mistakes[("01_embedding", "no sqrt(d_model) scale")] == ("1", "ben")
    assert len(mistakes) == 7
    assert fitted == [(LESSON, SDPA, "learner-fitted; learner-nan")]
    assert "learner-fitted" in page.read_text()
