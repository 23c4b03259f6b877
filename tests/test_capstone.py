"""Lesson 10 trains the learner's own parts: each one that passes its lesson's checks, and the
reference wherever a part is missing, unfinished, broken or wrong (autograder/capstone.py)."""

import shutil

import nbformat
import torch

import solutions
from autograder import capstone, lessons
from autograder.authoring.samples import SAMPLES


def _course(tmp_path, **chosen):
    """A course folder holding, per lesson, a sample learner's notebook (lesson=student)."""
    for lesson, student in chosen.items():
        lesson = next(name for name in lessons.LESSON_NAMES if name.endswith(lesson))
        shutil.copytree(SAMPLES / student / lesson, tmp_path / lesson)
    return tmp_path


def test_each_part_is_the_learners_only_when_it_passes_its_checks(tmp_path):
    course = _course(tmp_path, embedding="ben", layer_norm="ada", feed_forward="cho")
    parts = capstone.own_parts(course)
    assert parts.whose["Embedding"] == "reference (yours fails lesson 01's checks: no sqrt(d_model) scale)"
    assert parts.whose["LayerNorm"] == "yours"
    assert parts.whose["PositionwiseFeedForward"] == "reference (not written yet)"
    assert parts.whose["Transformer"] == "reference (no saved notebook)"
    assert list(parts.whose) == [e for lesson in capstone.EARLIER for e in lessons.EXERCISES[lesson]]
    # the stand-in is the reference's code: it computes what the reference computes
    torch.manual_seed(0)
    mine = parts.Embedding(11, 8)
    reference = solutions.Embedding(11, 8)
    reference.load_state_dict(mine.state_dict())
    tokens = torch.tensor([[1, 2, 3]])
    assert torch.equal(mine(tokens), reference(tokens))
    # and the whole model builds from the mixture
    model = parts.Transformer(11, 11, d_model=8, n_heads=2, d_ff=16, n_layers=1, dropout=0.0)
    assert model(tokens, tokens, None, None).shape == (1, 3, 8)


def test_a_cell_that_does_not_run_falls_back_and_says_why(tmp_path):
    course = _course(tmp_path, layer_norm="ada")
    path = course / "06_layer_norm" / "layer_norm.ipynb"
    nb = nbformat.read(path, as_version=4)
    for cell in nb.cells:
        if cell.metadata.get("nbgrader", {}).get("grade_id") == "LayerNorm":
            cell.source = "class LayerNorm(nn.Module:\n    pass"
    nbformat.write(nb, path)
    parts = capstone.own_parts(course)
    assert parts.whose["LayerNorm"] == "reference (your cell raised SyntaxError)"
    assert parts.LayerNorm(4)(torch.ones(1, 4)).shape == (1, 4)


def test_grading_never_reads_other_lessons(tmp_path, monkeypatch):
    monkeypatch.setenv("NBGRADER_EXECUTION", "autograde")
    parts = capstone.own_parts(_course(tmp_path, layer_norm="ada"))
    assert parts.LayerNorm is solutions.LayerNorm
    assert parts.Transformer is solutions.Transformer
    assert set(parts.whose.values()) == {"reference (grading uses the reference parts)"}
