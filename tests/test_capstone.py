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


def _tiny(**changes):
    from solutions.capstone import Config, held_out_set

    small = {
        "d_model": 16,
        "d_ff": 32,
        "batch_size": 16,
        "warmup": 5,
        "max_steps": 6,
        "every": 4,
        "average": 0.0,
    }
    config = Config(**{**small, **changes})
    held = solutions.make_batch(*held_out_set("reverse", 20, config.lengths, seed=5), 0, 1, 2)
    return config, held


def _model(config):
    torch.manual_seed(config.seed)
    return solutions.Transformer(
        13, 13, config.d_model, config.n_heads, config.d_ff, config.n_layers, 0.0, 64
    )


def test_the_capstone_trains_with_train_loop_in_calls_of_every_steps():
    """train calls train_loop with config.every batches at a time: the same steps, on the same batches,
    as train_step once per batch, evaluated after each call (and after the last, shorter one)."""
    from solutions.capstone import END, PAD, START, rate, train, training_pairs

    config, held = _tiny()
    history = train(_model(config), config, held, report=None)
    assert list(history.accuracy) == [4, 6]
    model = _model(config)
    optimizer = torch.optim.Adam(model.parameters(), lr=1.0, betas=(0.9, 0.98), eps=1e-9, fused=True)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda done: rate(done + 1, config.d_model, config.warmup, config.factor)
    )
    generator = torch.Generator().manual_seed(config.seed)
    excluded = {tuple(row[row != PAD].tolist()) for row in held["src"]}
    losses = []
    for _ in range(config.max_steps):
        pairs = training_pairs(config.task, config.batch_size, config.lengths, generator, excluded)
        batch = solutions.make_batch(*pairs, PAD, START, END)
        losses.append(solutions.train_step(model, batch, optimizer, PAD, config.smoothing, schedule))
    assert history.losses == losses


def test_the_capstone_clips_and_averages_through_the_loop():
    """config.clip reaches train_loop (a tiny clip changes the steps after the first), and the
    moving average follows every optimizer.step() inside it (the model ends holding the average)."""
    from solutions.capstone import train

    config, held = _tiny()
    plain = train(_model(config), config, held, report=None).losses
    clipped = train(_model(config), _tiny(clip=1e-3)[0], held, report=None).losses
    assert clipped[0] == plain[0] and clipped[1] != plain[1]
    averaged = _model(config)
    train(averaged, _tiny(average=0.5)[0], held, report=None)
    ema = None
    for steps in range(1, config.max_steps + 1):  # the weights after each step, run again up to it
        weights = _model(config)
        train(weights, _tiny(max_steps=steps)[0], held, report=None)
        state = weights.state_dict()
        ema = state if ema is None else {n: 0.5 * ema[n] + 0.5 * state[n] for n in state}
    for name, value in averaged.state_dict().items():
        assert torch.allclose(value, ema[name], atol=1e-6), name


def test_lesson_10_parts_that_fail_their_checks_are_replaced_by_the_reference_and_named(monkeypatch):
    monkeypatch.delenv("NBGRADER_EXECUTION", raising=False)

    def sequence_loss(log_probs, target, pad_id, smoothing=0.0):  # the sum, not the mean
        keep = target != pad_id
        return -(log_probs.gather(-1, target.unsqueeze(-1)).squeeze(-1) * keep).sum()

    def exact_match(predicted, target, start_id, end_id):
        raise NotImplementedError()

    scope = {"make_batch": solutions.make_batch, "sequence_loss": sequence_loss, "exact_match": exact_match}
    parts = capstone.training_parts(scope)
    assert parts.whose == {
        "make_batch": "yours",
        "sequence_loss": "reference (yours fails its checks above: sum instead of mean)",
        "rate": "reference (not defined in this notebook)",
        "train_step": "reference (not defined in this notebook)",
        "exact_match": "reference (not written yet)",
        "train_loop": "reference (not defined in this notebook)",
    }
    assert parts.make_batch is solutions.make_batch
    assert parts.sequence_loss is solutions.sequence_loss and parts.exact_match is solutions.exact_match
    assert "sequence_loss: reference (yours fails" in parts.table()


def test_grading_trains_with_lesson_10s_reference_parts(monkeypatch):
    monkeypatch.setenv("NBGRADER_EXECUTION", "autograde")
    parts = capstone.training_parts({"train_loop": lambda *args, **kwargs: []})
    assert parts.train_loop is solutions.train_loop
    assert set(parts.whose.values()) == {"reference (grading uses the reference parts)"}
