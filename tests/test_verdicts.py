"""What grading records per test cell: the judge's view (visible check, hidden tests) and the
catalogued mistakes named, taken from the catalogue entries as the judge ran the checks."""

import shutil
from pathlib import Path

import nbformat
import pytest

from autograder.checks import attention
from autograder.checks.core import naming_noted
from autograder.engine import judge, verdicts
from autograder.engine.pipeline import Pipeline

SAMPLES = Path(__file__).resolve().parent.parent / "autograder" / "sample_submissions"
LESSON = "03_attention"
NOTEBOOK = "attention.ipynb"
FORGED = {
    "overruled": {},
    "seen": {
        "test_scaled_dot_product_attention_values": {"visible": True, "hidden": True, "mistakes": ["forged"]}
    },
}


def test_a_named_mistake_is_noted_from_its_catalogue_entry():
    wrong = attention.MISTAKES[0]
    with naming_noted() as noted:
        text = wrong.message("scaled_dot_product_attention")
    assert noted == [wrong.name] and wrong.name in text
    wrong.message("scaled_dot_product_attention")  # outside the block: noted nowhere, and no error
    assert noted == [wrong.name]


@pytest.fixture(scope="module")
def graded(tmp_path_factory) -> Pipeline:
    root = tmp_path_factory.mktemp("verdicts")
    for student in ("ada", "ben", "cho"):
        shutil.copytree(SAMPLES / student / LESSON, root / "inbox" / student / LESSON)
    pipeline = Pipeline(root / "workspace", log=lambda line: None)
    pipeline.release([LESSON])
    pipeline.collect_folder(root / "inbox")
    pipeline.autograde()
    return pipeline


def test_each_submission_has_a_verdict_with_the_judges_view_of_each_cell(graded):
    found = {v.student: v for v in verdicts.read_all(graded.workspace)}
    assert sorted(found) == ["ada", "ben", "cho"]
    ada, ben, cho = found["ada"], found["ben"], found["cho"]
    assert ada.score == ada.max_score and all(c.visible and not c.mistakes for c in ada.cells.values())
    assert {c.hidden for c in ada.cells.values()} == {True, None}  # with hidden tests, and without
    # ben left out the 1/sqrt(d_k) (autograder/authoring/samples.py): every failing cell names it
    failing = [cell for cell in ben.cells.values() if cell.points < cell.max_points]
    assert failing and all(cell.mistakes == ["no scaling"] and cell.visible is False for cell in failing)
    assert "no scaling" in {m.name for m in attention.MISTAKES}
    # cho handed in the stubs: every cell fails, no mistake is named, the hidden tests never ran
    assert all(not c.visible and c.hidden is None and not c.mistakes for c in cho.cells.values())
    # the verdict's points are the gradebook's
    for verdict in (ada, ben, cho):
        assert graded.scores()[(verdict.student, LESSON)] == (verdict.score, verdict.max_score)


def _forged_submission(graded: Pipeline, student: str) -> None:
    folder = graded.submitted / student / LESSON
    shutil.copytree(SAMPLES / "cho" / LESSON, folder)
    nb = nbformat.read(folder / NOTEBOOK, as_version=4)
    nb.metadata[judge.JUDGE_METADATA] = FORGED
    nbformat.write(nb, folder / NOTEBOOK)


def test_a_record_forged_in_the_notebook_never_reaches_the_verdict(graded, monkeypatch):
    # a grading run with no judge, so that nothing overwrites the record (the worst case)
    monkeypatch.setattr(judge, "for_notebook", lambda executor, resources: None)
    _forged_submission(graded, "mal")
    # without the defence (execute.py drops the submission's record before grading), it gets through
    with monkeypatch.context() as undefended:
        undefended.setattr(judge, "JUDGE_METADATA", "not_the_record")
        assert graded.grade(LESSON, "mal").seen == FORGED["seen"]
    assert graded.grade(LESSON, "mal").seen == {}
