"""A .view on a tensor that is not contiguous is told which operation made it so, as the line
that calls .view writes it, or that it is not known: never a transpose the code does not hold."""

import pytest
import torch

from autograder.checks import CheckFailure, core


def _merge_after_transpose(x):
    return x.transpose(1, 2).view(x.size(0), -1)


def _target_sliced(target):
    return target[:, 1:].view(-1)


def _batch_view(batch):
    return batch["tgt_out"].view(-1)


def _view_by_name(x):
    return getattr(x, "view")(-1)  # noqa: B009 - no line shows the receiver of a .view call


CASES = [
    (
        _merge_after_transpose,
        torch.zeros(2, 3, 4),
        "`x.transpose(1, 2)` is not contiguous",
        ".transpose(1, 2) only",
    ),
    (_target_sliced, torch.zeros(3, 6), "`target[:, 1:]` is not contiguous", "[:, 1:] only changes"),
    (_batch_view, {"tgt_out": torch.zeros(3, 6)[:, 1:]}, '`batch["tgt_out"]` is not', "does not show which"),
    (_view_by_name, torch.zeros(3, 6).t(), "because its tensor is not", "is not known here"),
]


@pytest.mark.parametrize(("fn", "argument", "tensor", "maker"), CASES, ids=[c[0].__name__ for c in CASES])
def test_the_view_message_names_what_made_the_tensor_not_contiguous(fn, argument, tensor, maker):
    with pytest.raises(CheckFailure) as failure:
        core.call("an_exercise", fn, argument)
    message = str(failure.value)
    assert tensor in message and maker in message, message
    assert "Call .contiguous() before .view(...)" in message
    if fn is not _merge_after_transpose:
        assert "transpose(1, 2)" not in message, message
