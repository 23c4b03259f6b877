"""Hidden tests for lesson 04: fresh sizes, tokens and pad ids on every run, compared with the
reference package through the visible checks' comparisons (so a known mistake is still named)."""

import torch

from autograder.checks import masking
from autograder.checks.answers import answer
from autograder.hidden.core import Fresh, replayable
from solutions.masking import causal_mask, decoder_mask, padding_mask


def _padded_batch(fresh: Fresh, pad_id: int) -> torch.Tensor:
    """Long[B, T] of ordinary tokens (0 among them when it is not the pad id), each row padded on
    the right by a different amount, one row not at all."""
    b, t = fresh.size(2, 5), fresh.size(3, 10)
    vocab_size = max(pad_id + 1, 12)
    tokens = fresh.tokens(b, t, vocab_size=vocab_size)
    tokens[tokens == pad_id] = (pad_id + 1) % vocab_size  # no stray padding inside a sentence
    if pad_id != 0:
        tokens[:, 0] = 0  # an ordinary word with id 0
    for row in range(1, b):
        length = max(1, t - row * fresh.size(1, max(1, (t - 1) // (b - 1))))
        tokens[row, length:] = pad_id
    return tokens


def _pad_ids(fresh: Fresh) -> list[int]:
    return [0, fresh.size(1, 30), fresh.size(1, 30)]


@replayable
def hidden_causal_mask(fresh: Fresh, fn) -> None:
    for size in (fresh.size(2, 16), fresh.size(2, 16), 1):
        masking.compare_causal(fn, size, expected=answer(causal_mask, size, masking.DEVICE))


@replayable
def hidden_padding_mask(fresh: Fresh, fn) -> None:
    for pad_id in _pad_ids(fresh):
        tokens = _padded_batch(fresh, pad_id)
        masking.compare_padding(fn, tokens, pad_id, expected=answer(padding_mask, tokens, pad_id))


@replayable
def hidden_decoder_mask(fresh: Fresh, fn) -> None:
    for pad_id in _pad_ids(fresh):
        tokens = _padded_batch(fresh, pad_id)
        masking.compare_decoder(fn, tokens, pad_id, expected=answer(decoder_mask, tokens, pad_id))
