"""Hidden tests for lesson 10's make_batch, sequence_loss, rate and exact_match: fresh sizes,
tokens and special ids on every run (pad_id not 0, 0 an ordinary word), compared with the
reference package through the visible checks' comparisons, so a known mistake is still named."""

import torch

from autograder.checks import training as checks
from autograder.checks.answers import answer
from autograder.checks.device import DEVICE
from autograder.hidden.core import Fresh, replayable
from solutions.training import exact_match, make_batch, rate, sequence_loss


def _ids(fresh: Fresh) -> list[tuple[int, int, int]]:
    """(pad_id, start_id, end_id): the lesson's, then fresh distinct ones with pad_id > 0."""
    pad, start, end = (torch.randperm(29, generator=fresh.generator)[:3] + 1).tolist()
    return [(checks.PAD, checks.START, checks.END), (pad, start, end)]


def _words(fresh: Fresh, count: int, special: tuple[int, ...]) -> list[int]:
    """``count`` ordinary tokens, none of the special ids (0 is one where it is not special)."""
    vocabulary = [token for token in range(max(special) + 8) if token not in special]
    picks = torch.randint(0, len(vocabulary), (count,), generator=fresh.generator)
    return [vocabulary[int(i)] for i in picks]


def _rows(fresh: Fresh, lengths: list[int], special: tuple[int, ...]) -> list[list[int]]:
    return [_words(fresh, length, special) for length in lengths]


@replayable
def hidden_make_batch(fresh: Fresh, fn) -> None:
    """Fresh B, lengths and tokens; one target strictly the longest, S != T."""
    for ids in _ids(fresh):
        batch = fresh.size(2, 5)
        targets = [fresh.size(1, 6) for _ in range(batch)]
        targets[fresh.size(0, batch - 1)] = max(targets) + 1  # the others are padded
        sources = [fresh.size(1, 8) for _ in range(batch)]
        if max(sources) == max(targets) + 1:  # S == T would hide a src_mask built from the target
            sources[sources.index(max(sources))] += 1
        sources, targets = _rows(fresh, sources, ids), _rows(fresh, targets, ids)
        checks.compare_batch(fn, sources, targets, *ids, expected=answer(make_batch, sources, targets, *ids))


@replayable
def hidden_sequence_loss(fresh: Fresh, fn, smoothing: bool) -> None:
    """Fresh B, T, V, pad_id (0, then not 0), padding and log-probabilities; the last trial's
    logits lie far apart. With ``smoothing``, a fresh smoothing in [0.05, 0.4]."""
    for trial, pad_id in enumerate((0, fresh.size(1, 6))):
        batch, length, vocab = fresh.size(2, 5), fresh.size(3, 8), fresh.size(pad_id + 3, 16)
        target = fresh.tokens(batch, length, vocab_size=vocab)
        target[target == pad_id] = (pad_id + 1) % vocab  # padding only at the end of a row
        for row in range(batch):  # each row padded but one, each with a real token
            target[row, fresh.size(1, length - 1) :] = pad_id
        target[fresh.size(0, batch - 1)] = fresh.tokens(length, vocab_size=vocab).clamp(min=pad_id + 1)
        target[fresh.size(0, batch - 1), 0] = 0 if pad_id else 1  # 0 an ordinary word when it is not pad
        logits = fresh.tensor(batch, length, vocab) * (30.0 if trial else 2.0)
        log_probs = torch.log_softmax(logits, dim=-1)
        amount = 0.05 + 0.35 * float(torch.rand(1, generator=fresh.generator)) if smoothing else 0.0
        expected = answer(sequence_loss, log_probs, target, pad_id, amount)
        checks.compare_loss(fn, log_probs, target, pad_id, amount, expected=expected)


def _rates(cases: list[tuple]) -> list[float]:
    return [rate(*case) for case in cases]


@replayable
def hidden_rate(fresh: Fresh, fn) -> None:
    """Fresh d_model, warmup and factor (not 1); steps in the warm-up, at its end and after it;
    step 0 refused."""
    cases = []
    for _ in range(2):
        d_model, warmup = 2 ** fresh.size(3, 10), fresh.size(2, 5000)
        factor = round(0.5 + 2.5 * float(torch.rand(1, generator=fresh.generator)), 3)
        factor = factor if factor != 1.0 else 1.5
        steps = [1, fresh.size(1, warmup - 1), warmup, fresh.size(warmup + 1, 10 * warmup)]
        cases += [(step, d_model, warmup, factor) for step in steps]
    checks.compare_rate(fn, cases, expected=answer(_rates, cases))
    checks.expect_step_0_refused(fn, cases[0][1], cases[0][2])


def _decodings(fresh: Fresh, end_id: int, special: tuple[int, ...]) -> list[tuple[list[int], list[int]]]:
    """Pairs (answer y_1 ... y_n, the decoding after <s>) of every kind, for decodings as wide as
    the target (7 tokens after <s>, once filled up)."""
    other = _words(fresh, 12, special)
    answers = [_words(fresh, 6, special)] + _rows(fresh, [fresh.size(2, 5) for _ in range(6)], special)
    full, garbage, no_end, wrong, early, late, extra = answers
    slip = fresh.size(0, len(wrong) - 1)
    wrong_row = wrong[:slip] + [wrong[slip] + 1 if wrong[slip] + 1 not in special else max(special) + 1]
    return [
        (full, full + [end_id]),  # right, as long as the target
        (garbage, garbage + [end_id] + other[:1]),  # right, then another token
        (no_end, no_end + other[:2]),  # no end at all
        (wrong, wrong_row + wrong[slip + 1 :] + [end_id]),  # one token wrong
        (early, early[: fresh.size(0, len(early) - 1)] + [end_id]),  # </s> too early
        (late, late + [other[0], end_id]),  # one token too many
        (extra, extra + [end_id]),  # right, then more </s>
    ]


def _cut_off(fresh: Fresh, width: int, special: tuple[int, ...]) -> list[tuple[list[int], list[int]]]:
    """Pairs (answer, decoding) cut at ``width`` tokens after <s>: just before </s>, earlier, and a
    short right one; end_id is added to the short one by the caller."""
    before, earlier = _words(fresh, width, special), _words(fresh, width + fresh.size(1, 3), special)
    short = _words(fresh, fresh.size(1, width - 1), special)
    return [(before, before), (earlier, earlier[:width]), (short, short)]


def _tensors(fresh: Fresh, pairs, start_id: int, end_id: int, fill: int, pad_id: int):
    """predicted Long[B, L] (<s>, the decoding, then ``fill``) and target Long[B, T] (y </s> pad),
    rows shuffled."""
    order = torch.randperm(len(pairs), generator=fresh.generator).tolist()
    pairs = [pairs[i] for i in order]
    length = max(len(answer) for answer, _ in pairs) + 1
    width = max(len(decoding) for _, decoding in pairs)
    target = [answer + [end_id] + [pad_id] * (length - len(answer) - 1) for answer, _ in pairs]
    predicted = [[start_id] + decoding + [fill] * (width - len(decoding)) for _, decoding in pairs]
    return torch.tensor(predicted, device=DEVICE), torch.tensor(target, device=DEVICE)


@replayable
def hidden_exact_match(fresh: Fresh, fn) -> None:
    """Fresh ids, answers and decodings of every kind, both wider than the target (padded with
    end_id, then with other tokens) and cut off before it."""
    for pad_id, start_id, end_id in _ids(fresh):
        special = (pad_id, start_id, end_id)
        for fill in (end_id, _words(fresh, 1, special)[0]):
            predicted, target = _tensors(
                fresh, _decodings(fresh, end_id, special), start_id, end_id, fill, pad_id
            )
            expected = answer(exact_match, predicted, target, start_id, end_id)
            checks.compare_exact_match(fn, predicted, target, start_id, end_id, expected=expected)
        width = fresh.size(2, 4)
        pairs = _cut_off(fresh, width, special)
        pairs[-1] = (pairs[-1][0], pairs[-1][1] + [end_id])
        predicted, target = _tensors(fresh, pairs, start_id, end_id, end_id, pad_id)
        expected = answer(exact_match, predicted, target, start_id, end_id)
        checks.compare_exact_match(fn, predicted, target, start_id, end_id, expected=expected)
