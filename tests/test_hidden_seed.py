"""A hidden test's failure names its seed, and COURSE_HIDDEN_SEED replays exactly that failure."""

import re

import pytest

from autograder.checks import CheckFailure
from autograder.hidden.attention import hidden_scaled_dot_product_attention
from autograder.hidden.core import SEED_VARIABLE, Fresh


def _no_scaling(q, k, v, mask=None, dropout_p=0.0):
    weights = (q @ k.transpose(-2, -1)).softmax(dim=-1)  # the mistake: no 1 / sqrt(d_k)
    return weights @ v, weights


def _failure(monkeypatch, seed: str | None) -> str:
    if seed is None:
        monkeypatch.delenv(SEED_VARIABLE, raising=False)
    else:
        monkeypatch.setenv(SEED_VARIABLE, seed)
    with pytest.raises(CheckFailure) as failure:
        hidden_scaled_dot_product_attention(_no_scaling, masked=False)
    return str(failure.value)


def test_a_failure_names_its_seed_and_the_seed_replays_it(monkeypatch):
    first = _failure(monkeypatch, None)
    found = re.search(rf"seed (\d+): {SEED_VARIABLE}=(\d+) replays it", first)
    assert found and found[1] == found[2], first
    assert "no scaling" in first  # the mistake is still named
    assert _failure(monkeypatch, found[1]) == first


def test_the_same_seed_draws_the_same_values_and_another_seed_others(monkeypatch):
    monkeypatch.setenv(SEED_VARIABLE, "1234")
    one, two = Fresh(), Fresh()
    assert one.seed == two.seed == 1234
    first = one.tensor(3, 4)
    assert first.equal(two.tensor(3, 4))
    monkeypatch.setenv(SEED_VARIABLE, "1235")
    assert not first.equal(Fresh().tensor(3, 4))


def test_a_seed_that_is_not_a_number_is_a_clear_error(monkeypatch):
    monkeypatch.setenv(SEED_VARIABLE, "abc")
    with pytest.raises(ValueError, match="COURSE_HIDDEN_SEED must be a whole number"):
        Fresh()
