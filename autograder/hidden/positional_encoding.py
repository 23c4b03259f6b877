"""Hidden tests for lesson 02."""

import torch

from autograder.checks import core
from autograder.checks import positional_encoding as checks
from autograder.checks.answers import answer
from autograder.checks.core import build, load_weights
from autograder.checks.device import DEVICE, DTYPE
from autograder.hidden.core import Fresh, replayable
from solutions.positional_encoding import PositionalEncoding as Reference
from solutions.positional_encoding import sinusoidal_encoding as reference_table


def _sizes(fresh: Fresh) -> tuple[int, int]:
    """max_len in [6, 64] (a float32 table stays within float32 tolerances), an even D >= 4."""
    return fresh.size(6, 64), 2 * fresh.size(2, 20)


def _reference_table(max_len: int, d_model: int) -> torch.Tensor:
    return reference_table(max_len, d_model).to(DEVICE)


@replayable
def hidden_sinusoidal_encoding(fresh: Fresh, fn, trials: int = 3) -> None:
    """Fresh max_len and even d_model against the reference table; fresh odd d_model raises."""
    for _ in range(trials):
        max_len, d_model = _sizes(fresh)
        checks.compare_table(fn, max_len, d_model, expected=answer(_reference_table, max_len, d_model))
        checks.expect_odd_raises(fn, max_len, 2 * fresh.size(1, 20) + 1)


def _modules(cls, max_len: int, d_model: int, dropout: float = 0.0):
    """The learner's module and the reference, same arguments; the learner's own table is
    compared with the reference's, then the reference's state is loaded into it (strict)."""
    module = build(checks.MODULE, cls, d_model, max_len=max_len, dropout=dropout)
    reference = Reference(d_model, max_len=max_len, dropout=dropout).to(device=DEVICE, dtype=DTYPE).eval()
    table = checks.table_of(module)
    core.expect_shape(checks.MODULE, "the buffer pe", table, checks.PE_LETTERS, (max_len, d_model))
    core.expect_close(
        checks.MODULE, "the buffer pe", table.detach().float(), reference.pe.float(), checks.PE_LETTERS
    )
    load_weights(checks.MODULE, module, reference.state_dict())
    return module, reference


@replayable
def hidden_positional_encoding(fresh: Fresh, cls, trials: int = 3) -> None:
    """Fresh sizes: T < max_len, T != B, T != D; the output equals the reference's in eval mode."""
    for _ in range(trials):
        max_len, d_model = _sizes(fresh)
        module, reference = _modules(cls, max_len, d_model)
        batch = fresh.size(2, 4)
        # T < max_len, and T != B, T != D: otherwise pe[:B] or pe[:D] would be the right rows
        lengths = [t for t in range(2, max_len) if t not in (batch, d_model)]
        length = lengths[fresh.size(0, len(lengths) - 1)]
        x = fresh.tensor(batch, length, d_model)
        checks.compare_module(module, x, answer(reference, x))


@replayable
def hidden_positional_encoding_length_and_dropout(fresh: Fresh, cls, trials: int = 2) -> None:
    """Fresh sizes: T == max_len works, T > max_len raises ValueError; fresh dropout p behaves
    like nn.Dropout on x + pe[:T] (off in eval mode)."""
    for _ in range(trials):
        p = 0.2 + 0.5 * float(torch.rand(1, generator=fresh.generator))
        # at least 2 * 8 * 16 = 256 entries: some are surely dropped and some kept
        max_len, d_model, batch = fresh.size(8, 64), 2 * fresh.size(8, 20), fresh.size(2, 4)
        module, _ = _modules(cls, max_len, d_model, dropout=p)
        checks.expect_length_handling(module, d_model, max_len, batch, seed=fresh.size(0, 10**6))
        x = fresh.tensor(batch, fresh.size(8, max_len), d_model)
        checks.expect_dropout(module, x, p, seed=fresh.size(0, 10**6))
