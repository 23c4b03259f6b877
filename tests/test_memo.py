"""The checks keep what their own code computed on their own cases (autograder/checks/memo.py):
keyed by everything it read, never kept when it cannot all be read, and never changing a verdict
or a message; tests/test_hostile_memo.py holds the attacks on it."""

import copy

import pytest
import torch
from torch import nn

from autograder.checks import CheckFailure, memo, train_loop
from autograder.checks.oracles import torch_layer
from tests.helpers import CATALOGUE, buggy


def _layer() -> nn.Module:
    return torch_layer(True, 8, 2, 16, seed=3)


def test_the_same_contents_have_the_same_fingerprint_and_any_change_another():
    layer = _layer()
    batch = {"src": torch.arange(6).reshape(2, 3)}
    key = memo.fingerprint((layer, batch))
    assert key is not None
    assert memo.fingerprint((copy.deepcopy(layer), {"src": torch.arange(6).reshape(2, 3)})) == key

    changed_weight = copy.deepcopy(layer)
    with torch.no_grad():
        changed_weight.linear1.weight[0, 0] += 1e-12
    changed_mode = copy.deepcopy(layer).eval()
    changed_setting = copy.deepcopy(layer)
    changed_setting.norm_first = not layer.norm_first
    with_gradient = copy.deepcopy(layer)
    with_gradient.linear2.bias.grad = torch.zeros_like(layer.linear2.bias)
    a, b = [torch.zeros(2)], [torch.ones(2)]
    others = [
        (with_gradient, batch),
        (layer, {"src": [a, b, a]}),  # the same objects, referred to in another order
        (layer, {"src": [a, b, b]}),
        (changed_weight, batch),
        (changed_mode, batch),
        (changed_setting, batch),
        (layer, {"src": torch.arange(6).reshape(3, 2).t()}),  # the same numbers, other strides
        (layer, {"src": torch.arange(6).reshape(2, 3).double()}),
        (layer, {"tgt": torch.arange(6).reshape(2, 3)}),
    ]
    assert len({key, *(memo.fingerprint(other) for other in others)}) == len(others) + 1, "two alike"


class LearnersLayer(nn.Linear):
    """A class a notebook defines: it may be defined again, under the same name, with another forward."""


def test_what_it_cannot_read_in_full_has_no_fingerprint():
    hooked = _layer()
    hooked.register_forward_hook(lambda *_: None)
    assert memo.fingerprint(_layer()) is not None
    assert memo.fingerprint(hooked) is None
    assert memo.fingerprint(LearnersLayer(2, 2)) is None
    assert memo.fingerprint(lambda x: x) is None
    assert memo.fingerprint([object()]) is None

    handle = nn.modules.module.register_module_forward_hook(lambda *_: None)
    try:
        assert memo.fingerprint(_layer()) is None
    finally:
        handle.remove()


CALLS: list[float] = []


def _doubled(tensor: torch.Tensor) -> torch.Tensor:
    CALLS.append(float(tensor.sum()))
    return tensor * 2


@pytest.fixture
def tests_as_own_code(monkeypatch):
    """This file's functions may be named in a key, as the checks' own are."""
    monkeypatch.setattr(memo, "OWN_CODE", (*memo.OWN_CODE, __name__.split(".")[0]))
    CALLS.clear()


def test_a_result_is_computed_once_for_the_same_contents_and_again_for_others(tests_as_own_code):
    kept = memo.Memo(kept=2)
    first = kept.remembered(_doubled, torch.ones(3))
    assert torch.equal(first, torch.full((3,), 2.0))
    assert kept.remembered(_doubled, torch.ones(3)) is first
    assert kept.remembered(_doubled, torch.zeros(3)) is not first
    assert CALLS == [3.0, 0.0]
    kept.remembered(_doubled, torch.full((3,), 5.0))
    kept.remembered(_doubled, torch.ones(3))  # dropped as the least recently used: computed again
    assert CALLS == [3.0, 0.0, 15.0, 3.0]
    assert len(kept.results) == 2


def _writes_into(tensor: torch.Tensor) -> torch.Tensor:
    tensor += 1
    return tensor.clone()


def _draws(tensor: torch.Tensor) -> torch.Tensor:
    return tensor + torch.rand(1)


@pytest.mark.parametrize("compute", [_writes_into, _draws])
def test_a_computation_that_changes_its_arguments_or_draws_random_numbers_is_not_kept(
    tests_as_own_code, compute
):
    kept = memo.Memo()
    kept.remembered(compute, torch.zeros(2))
    assert len(kept.results) == 0
    kept.remembered(_doubled, torch.zeros(2))
    assert len(kept.results) == 1


def test_a_mistake_checked_twice_trains_the_catalogue_once_and_is_told_the_same(monkeypatch):
    """train_loop's known mistakes each train the stand-in; the second learner with the same
    mistake (a class, under the judge) is told the same without them training again."""
    monkeypatch.setattr(memo, "MEMO", memo.Memo())
    monkeypatch.setattr(memo, "remembered", memo.MEMO.remembered)
    steps = []
    step = torch.optim.SGD.step
    monkeypatch.setattr(torch.optim.SGD, "step", lambda self, *a, **k: steps.append(1) or step(self, *a, **k))

    told, counted = [], []
    for _ in range(2):
        steps.clear()
        with pytest.raises(CheckFailure) as failure:
            train_loop.check_train_loop(_mistake("scheduler not stepped"), *_loop_arguments())
        told.append(str(failure.value))
        counted.append(len(steps))
    assert "scheduler not stepped" in told[0]
    assert told[0] == told[1]
    assert counted[1] < counted[0] / 3, counted


def _mistake(name: str):
    return buggy("train_loop", next(m for m in CATALOGUE["train_loop"] if m.name == name))


def _loop_arguments() -> tuple:
    import solutions

    return solutions.Transformer, torch.optim
