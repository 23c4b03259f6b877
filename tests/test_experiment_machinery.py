"""The experiment machinery that lessons 10 and 11 import (autograder/training_runs.py,
autograder/efficiency_measures.py): what their printed numbers rest on, on inputs whose answer is
known. nbval runs them inside the lessons; these say what they compute."""

import math

import pytest
import torch

from autograder import efficiency_measures as measures
from autograder import training_runs as runs
from solutions import Decoder, Encoder, Transformer
from solutions.capstone import Config, History


def test_spikes_start_where_a_loss_doubles_the_median_before_it():
    losses = [1.0] * 12 + [3.0, 2.5, 1.0, 1.0] + [1.0] * 10 + [2.1]
    # step 13 starts a spike and step 14 belongs to it; step 27 (2.1 > 2 * 1.0) starts another
    assert runs.spikes(losses) == [13, 27]
    assert runs.spikes([1.0] * 30) == []


def test_loss_at_is_the_mean_of_the_window_up_to_the_step():
    history = History(losses=[float(step) for step in range(1, 21)])
    assert runs.loss_at(history, 20) == pytest.approx(sum(range(11, 21)) / 10)
    assert runs.loss_at(history, 10, window=5) == pytest.approx(8.0)


def test_pre_ln_models_start_from_the_post_ln_weights():
    new_model = runs.model_maker(Transformer, Encoder, Decoder, torch.device("cpu"))
    setup = Config(seed=3)
    post, pre = new_model(setup).state_dict(), new_model(setup, norm_first=True).state_dict()
    assert post.keys() == pre.keys()
    assert all(torch.equal(post[name], pre[name]) for name in post)
    assert new_model(setup, norm_first=True).encoder.layers[0].norm_first
    other = new_model(Config(seed=4)).state_dict()
    assert not all(torch.equal(post[name], other[name]) for name in post)


def test_gradient_norms_are_the_norm_of_all_gradients_together():
    model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Linear(4, 2))
    norms = runs.record_gradient_norms(model)
    model(torch.randn(5, 3)).square().sum().backward()
    expected = torch.stack([p.grad.pow(2).sum() for p in model.parameters()]).sum().sqrt().item()
    assert norms == [pytest.approx(expected)]


def test_fitted_exponent_of_a_power_law():
    sizes = [32, 64, 128, 256]
    assert measures.fitted_exponent(sizes, [7.0 * n**1.5 for n in sizes]) == pytest.approx(1.5)
    assert measures.fitted_exponent(sizes, [0.1 * n**2 for n in sizes]) == pytest.approx(2.0)


def test_saved_bytes_of_lesson_03_follow_the_formula():
    """Q, K, V and the weights: 4 (3 n D + n^2 h) bytes, which the lesson prints beside it."""
    for n in (64, 128):
        assert measures.saved_bytes(measures.course_attention, n) == 4 * (3 * n * 128 + n * n * 4)


def test_preallocated_attention_is_lesson_03s():
    q, k, v = (torch.randn(1, 2, 16, 8) for _ in range(3))
    buffers = (torch.empty(1, 2, 16, 16), torch.empty(1, 2, 16, 8))
    expected = measures.course_attention(q, k, v)
    assert torch.allclose(measures.preallocated(buffers)(q, k, v), expected, atol=1e-6)


def test_largest_count_sees_the_score_matrix():
    x = torch.randn(1, 2, 64, 8)
    assert measures.largest_count(measures.course_attention, x, x, x) == 2 * 64 * 64


def test_faults_and_seconds_counts_per_call():
    faults, seconds = measures.faults_and_seconds(torch.ones, 1000, calls=2)
    assert seconds > 0
    assert math.isnan(faults) if measures.resource is None else faults >= 0
