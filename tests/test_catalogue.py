"""The mistake catalogue is data (autograder/checks/catalogue/*.toml) and the checks compute it:
each entry is computed exactly once, under its name, and the engine refuses what it cannot read."""

import pytest

from autograder.checks import core
from autograder.lessons import EXERCISES
from tests.helpers import CATALOGUE


def test_every_entry_is_computed_once_in_the_files_order():
    data = core.catalogue_data()
    assert sorted(data) == sorted(CATALOGUE), "the data files and the checks catalogue other exercises"
    for exercise, entries in data.items():
        written = [entry["name"] for entry in entries]
        assert len(set(written)) == len(written), f"{exercise}: a mistake is catalogued twice"
        assert [m.name for m in CATALOGUE[exercise]] == written, f"{exercise}: computed {CATALOGUE[exercise]}"


def test_every_catalogued_exercise_is_an_exercise_of_a_lesson():
    exercises = {e for lesson in EXERCISES.values() for e in lesson}
    assert set(core.catalogue_data()) <= exercises


@pytest.mark.parametrize("exercise", sorted(CATALOGUE))
def test_hints_are_sentences_that_say_what_to_do(exercise):
    for mistake in CATALOGUE[exercise]:
        assert mistake.hint.endswith((".", ")")), f"{mistake.name}: {mistake.hint}"
        assert 20 < len(mistake.hint) < 400, f"{mistake.name}: a hint of {len(mistake.hint)} characters"


def test_a_computation_without_an_entry_is_refused():
    with pytest.raises(ValueError, match=r"Embedding: no entry in catalogue/ for \['made up'\]"):
        core.catalogue("Embedding", {"made up": lambda self, tokens: tokens})


def test_an_entry_with_an_unknown_key_is_refused(tmp_path, monkeypatch):
    (tmp_path / "x.toml").write_text('[[Embedding]]\nname = "a"\nhint = "b"\nswich = { c = 1 }\n')
    monkeypatch.setattr(core, "CATALOGUE_FOLDER", tmp_path)
    core.catalogue_data.cache_clear()
    try:
        with pytest.raises(ValueError, match="other keys than name, hint, switch and shared_with"):
            core.catalogue_data()
    finally:
        core.catalogue_data.cache_clear()


def test_a_switch_computes_the_variant_with_its_arguments():
    switches = {e["name"]: e["switch"] for e in core.catalogue_data()["Decoder"]}
    for mistake in core.catalogue("Decoder", variant=lambda stack, **switch: (stack, switch)):
        assert mistake.compute("stack") == ("stack", switches[mistake.name])


def test_an_exercise_without_entries_is_refused():
    with pytest.raises(
        ValueError, match=r"made_up: no mistakes in .*catalogue \(are its .toml files installed\?\)"
    ):
        core.catalogue("made_up", variant=lambda *args, **switch: None)


def test_a_shared_mistake_is_written_once_and_takes_its_owners_hint():
    data = core.catalogue_data()
    hints = {entry["name"]: entry["hint"] for entry in data["train_step"]}
    shared = [entry for entry in data["train_loop"] if entry.get("shared_with") == "train_step"]
    assert {e["name"] for e in shared} >= {
        "padding not ignored",
        "scheduler stepped before the optimizer",
        "gradients cleared between backward and step",
        "target shifted a second time",
    }
    for entry in shared:
        assert entry["hint"] == hints[entry["name"]]
    raw = (core.CATALOGUE_FOLDER / "train_step.toml").read_text()
    assert raw.count(hints["scheduler stepped before the optimizer"]) == 1, "a shared hint is written twice"


def _load(tmp_path, monkeypatch, text: str) -> dict:
    (tmp_path / "x.toml").write_text(text)
    monkeypatch.setattr(core, "CATALOGUE_FOLDER", tmp_path)
    core.catalogue_data.cache_clear()
    try:
        return core.catalogue_data()
    finally:
        core.catalogue_data.cache_clear()


def test_a_shared_entry_without_its_owners_mistake_is_refused(tmp_path, monkeypatch):
    owner = '[[Embedding]]\nname = "a"\nhint = "the hint of a."\n'
    assert (
        _load(tmp_path, monkeypatch, owner + '[[LayerNorm]]\nname = "a"\nshared_with = "Embedding"\n')[
            "LayerNorm"
        ][0]["hint"]
        == "the hint of a."
    )
    with pytest.raises(ValueError, match="no mistake 'b' of Embedding to share"):
        _load(tmp_path, monkeypatch, owner + '[[LayerNorm]]\nname = "b"\nshared_with = "Embedding"\n')
    with pytest.raises(ValueError, match="lacks its name and its hint"):
        _load(
            tmp_path,
            monkeypatch,
            owner + '[[LayerNorm]]\nname = "a"\nhint = "h."\nshared_with = "Embedding"\n',
        )


def test_a_shared_mistake_is_told_in_cpp_to_lesson_12_and_in_python_elsewhere():
    data = core.catalogue_data()
    owner = next(e for e in data["MultiHeadAttention"] if e["name"] == "dropout also in eval mode")
    borrowers = {
        exercise: entry["hint"]
        for exercise, entries in data.items()
        for entry in entries
        if entry.get("shared_with") == "MultiHeadAttention" and entry["name"] == owner["name"]
    }
    assert {"CppPositionwiseFeedForward", "CppMultiHeadAttention", "EncoderLayer"} <= set(borrowers)
    for exercise, hint in borrowers.items():
        in_cpp = exercise in core.CPP_EXERCISES
        assert hint == (owner["hint_cpp"] if in_cpp else owner["hint"]), exercise
        assert ("is_training()" in hint) == in_cpp and ("self.training" in hint) != in_cpp, exercise
    raw = "".join(path.read_text() for path in core.CATALOGUE_FOLDER.glob("*.toml"))
    assert raw.count(owner["hint_cpp"]) == 1, "the C++ hint is written twice"


def test_a_cpp_hint_needs_the_hint_it_translates(tmp_path, monkeypatch):
    owner = '[[Embedding]]\nname = "a"\nhint = "in Python."\nhint_cpp = "in C++."\n'
    shared = '[[{}]]\nname = "a"\nshared_with = "Embedding"\n'
    data = _load(tmp_path, monkeypatch, owner + shared.format("LayerNorm") + shared.format("CppEmbedding"))
    assert data["LayerNorm"][0]["hint"] == "in Python." and data["CppEmbedding"][0]["hint"] == "in C++."
    with pytest.raises(ValueError, match="hint_cpp beside a hint"):
        _load(tmp_path, monkeypatch, '[[Embedding]]\nname = "a"\nshared_with = "X"\nhint_cpp = "b."\n')
