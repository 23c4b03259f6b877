"""Attacks on what the checks keep between calls (autograder/checks/memo.py).

The checks keep what the catalogued mistakes computed on a case, for the next check on the same
case. The attacker's train_loop computes the right losses, then writes into the batches it was
handed, so that everything the check computes after it (the oracle's loop, then each known
mistake's) runs on other data. In a kernel, or in any process that runs the checks for several
submissions in turn, the next learner's check builds a fresh case with the original batches.

Without the defence (a key that reads a tensor's shape and not its bytes), the next learner,
whose loop makes a catalogued mistake, is handed the outcomes computed on the attacker's data:
none matches, and the learner is told "the loss of step 1 is ..., expected ..." instead of the
mistake's name and hint. With it, the written batches are another key, and the next learner is
told what they did. A handle on an object in the kernel (under the judge) is never read into a
key at all, whatever class it claims.
"""

import socket
import threading

import pytest
import torch

from autograder.checks import CheckFailure, memo, train_loop
from autograder.checks.train_loop import oracle_loop
from autograder.engine.remote import Channel, Endpoint
from tests.helpers import CATALOGUE, buggy

MISTAKE = "scheduler not stepped"


def _attacker(model, batches, optimizer, pad_id, smoothing=0.0, scheduler=None, clip=None):
    batches = list(batches)
    losses = oracle_loop(model, batches, optimizer, pad_id, smoothing, scheduler, clip)
    for batch in batches:  # the right losses and weights; then the case's own batches are changed
        batch["tgt_out"][batch["tgt_out"] != pad_id] = 1
    return losses


def _told(fn) -> str:
    import solutions

    with pytest.raises(CheckFailure) as failure:
        train_loop.check_train_loop(fn, solutions.Transformer, torch.optim)
    return str(failure.value)


def _shape_only(tensor: torch.Tensor, digest, _seen: dict) -> None:
    digest.update(repr((tensor.dtype, tuple(tensor.shape))).encode())


@pytest.mark.parametrize("defended", [False, True], ids=["without the defence", "with it"])
def test_batches_written_by_one_learner_do_not_change_what_the_next_is_told(monkeypatch, defended):
    monkeypatch.setattr(memo, "MEMO", memo.Memo())
    monkeypatch.setattr(memo, "remembered", memo.MEMO.remembered)
    if not defended:
        monkeypatch.setattr(memo, "_write_tensor", _shape_only)
    mistake = buggy("train_loop", next(m for m in CATALOGUE["train_loop"] if m.name == MISTAKE))
    honest_message = _told(mistake)
    assert MISTAKE in honest_message
    memo.MEMO.results.clear()

    _told(_attacker)  # its batches no longer match what it computed: a failure, and kept outcomes
    told = _told(mistake)
    if defended:
        assert told == honest_message
    else:
        assert MISTAKE not in told, "the attack did not take: this test shows nothing"


def test_a_handle_on_the_kernels_objects_is_never_part_of_a_key():
    ours, theirs = socket.socketpair()
    kernel = Endpoint(Channel(theirs), {"layer": torch.nn.Linear(2, 2)})
    thread = threading.Thread(target=kernel.serve, daemon=True)
    thread.start()
    judge = Endpoint(Channel(ours))
    try:
        handle = judge.request("get", name="layer")
        assert isinstance(handle, torch.nn.Module), "the handle claims the module's class"
        assert memo.fingerprint(handle) is None
        assert memo.fingerprint({"model": handle}) is None
    finally:
        judge.say_goodbye()
        thread.join(timeout=10)
