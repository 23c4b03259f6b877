"""Checks for lesson 04: causal_mask, padding_mask and decoder_mask (bool, True = may attend).

Oracles: PyTorch's own mask conventions, turned into ours. ``nn.Transformer.
generate_square_subsequent_mask`` is a float mask with -inf where attending is not
allowed (so ``== 0`` is our causal mask), and ``nn.MultiheadAttention``'s
``key_padding_mask`` is True at padding (so its negation is our padding mask).

Inputs: B = 3 rows with different amounts of padding (none, 2, 4 pad tokens), T = 6,
and in the value checks pad_id = 2 with real tokens equal to 0, so a pad id
hard-coded to 0 shows. A mask is compared in this order: dtype (must be bool),
shape (each known shape mistake is named, with what broadcasting would do with
it), then the entries (each known mistake named, also when broadcast to the full shape).
"""

import torch
from torch import nn

from autograder.checks import core, shape_errors
from autograder.checks.answers import Expected
from autograder.checks.device import DEVICE

CAUSAL, PADDING, DECODER = "causal_mask", "padding_mask", "decoder_mask"
CAUSAL_LETTERS, PADDING_LETTERS, DECODER_LETTERS = "[T, T]", "[B, 1, 1, T]", "[B, 1, T, T]"

# Tokens: three rows with none, 2 and 4 pad tokens. With pad id 0 (the shape checks)
# and with pad id 2 (the value checks), where 0 is an ordinary token.
TOKENS_PAD_0 = [[5, 3, 7, 3, 8, 4], [6, 3, 1, 9, 0, 0], [4, 7, 0, 0, 0, 0]]
TOKENS_PAD_2 = [[5, 0, 7, 3, 0, 4], [6, 3, 0, 9, 2, 2], [4, 0, 2, 2, 2, 2]]


def tokens_tensor(rows: list[list[int]]) -> torch.Tensor:
    return torch.tensor(rows, dtype=torch.long, device=DEVICE)


# ---------------------------------------------------------------- the oracles


def expected_causal(size: int, device: torch.device | str | None = None) -> torch.Tensor:
    """PyTorch's causal mask (float, -inf = blocked, 0 = allowed) in our convention."""
    return nn.Transformer.generate_square_subsequent_mask(size, device=device) == 0


def expected_padding(tokens: torch.Tensor, pad_id: int) -> torch.Tensor:
    """nn.MultiheadAttention's key_padding_mask (True = padding) negated, shaped [B, 1, 1, T]."""
    key_padding_mask = tokens == pad_id  # [B, T], PyTorch's convention
    return (~key_padding_mask)[:, None, None, :]


def expected_decoder(tokens: torch.Tensor, pad_id: int) -> torch.Tensor:
    """What nn.TransformerDecoder gets as tgt_mask and tgt_key_padding_mask, in one mask [B, 1, T, T]."""
    size = tokens.size(1)
    return expected_padding(tokens, pad_id) & expected_causal(size, tokens.device)[None, None]


# ---------------------------------------------------------------- the known mistakes


def _ones(size: int, device, dtype=torch.bool) -> torch.Tensor:
    return torch.ones(size, size, dtype=dtype, device=device)


CAUSAL_MISTAKES = core.catalogue(
    CAUSAL,
    {
        "upper triangle (the mask transposed)": lambda size, device=None: _ones(size, device).triu(),
        "diagonal excluded": lambda size, device=None: _ones(size, device).tril(diagonal=-1),
        "inverted (True = blocked)": lambda size, device=None: _ones(size, device).triu(diagonal=1),
        "float mask instead of bool": lambda size, device=None: _ones(size, device, torch.float32).tril(),
        "integer mask instead of bool": lambda size, device=None: _ones(size, device, torch.long).tril(),
    },
)


PADDING_MISTAKES = core.catalogue(
    PADDING,
    {
        "inverted (tokens == pad_id)": lambda tokens, pad_id: (tokens == pad_id)[:, None, None, :],
        "pad_id hard-coded to 0": lambda tokens, pad_id: (tokens != 0)[:, None, None, :],
        "shape [B, T]": lambda tokens, pad_id: tokens != pad_id,
        "shape [B, 1, T]": lambda tokens, pad_id: (tokens != pad_id)[:, None, :],
        "shape [B, T, 1, 1]": lambda tokens, pad_id: (tokens != pad_id)[:, :, None, None],
        "wrong dtype (not bool)": lambda tokens, pad_id: (tokens != pad_id).long()[:, None, None, :],
    },
)


def _causal_for(tokens: torch.Tensor) -> torch.Tensor:
    return expected_causal(tokens.size(1), tokens.device)


DECODER_MISTAKES = core.catalogue(
    DECODER,
    {
        "causal only (padding forgotten)": lambda tokens, pad_id: _causal_for(tokens),
        "padding only (causal forgotten)": lambda tokens, pad_id: expected_padding(tokens, pad_id),
        "OR instead of AND": lambda tokens, pad_id: expected_padding(tokens, pad_id) | _causal_for(tokens),
        "padding applied to the queries (rows)": lambda tokens, pad_id: (
            (tokens != pad_id)[:, None, :, None] & _causal_for(tokens)
        ),
        "pad_id hard-coded to 0": lambda tokens, pad_id: expected_decoder(tokens, 0),
        "shape [B, T, T] (no head axis)": lambda tokens, pad_id: (
            (tokens != pad_id)[:, None, :] & _causal_for(tokens)
        ),
    },
)


# ---------------------------------------------------------------- comparing masks


def _describe(value: bool) -> str:
    return f"{value} ({'may attend' if value else 'blocked'})"


def compare_mask(
    exercise: str,
    actual,
    expected: torch.Tensor,
    letters: str,
    mistakes: list[tuple[core.Mistake, object]],
    rule: str,
) -> None:
    """Compare a mask with the expected one: dtype, then shape, then entries, naming known mistakes.

    ``rule`` says in words where the mask is True; it ends the message about wrong entries.
    """
    actual = core.expect_tensor(exercise, "the mask", actual)
    outputs = [(m, o) for m, o in mistakes if isinstance(o, torch.Tensor)]
    if actual.dtype != torch.bool:
        wrong_dtype = [(m, o) for m, o in outputs if o.dtype != torch.bool]
        same_kind = [m for m, o in wrong_dtype if o.is_floating_point() == actual.is_floating_point()]
        same_dtype = [m for m, o in wrong_dtype if o.dtype == actual.dtype]
        named = same_dtype + same_kind + [m for m, _ in wrong_dtype]
        hint = named[0].hint if named else "Masks are boolean here: build them from a comparison."
        raise core.CheckFailure(
            f"{exercise}: expected a boolean mask (dtype torch.bool), got {actual.dtype}. {hint}"
        )
    if actual.shape != expected.shape:
        named = next((m for m, o in outputs if o.shape == actual.shape), None)
        start = (
            f"{exercise}: expected a mask of shape {core.shape_text(letters, expected.shape)}, "
            f"got {list(actual.shape)}"
        )
        if named is not None:
            raise core.CheckFailure(f"{start}: a known mistake, {named.said()}. {named.hint}")
        raise core.CheckFailure(
            f"{start}. The shape decides which axis of the scores [B, h, T_q, T_k] each axis of the mask "
            "meets when they broadcast (shapes line up from the right)."
        )
    expected = expected.to(actual.device)
    if torch.equal(actual, expected):
        return
    for mistake, output in outputs:
        if output.dtype != torch.bool:
            continue
        try:
            full = output.to(actual.device).expand(expected.shape)  # a mistake broadcast to the full shape
        except RuntimeError:
            continue
        if torch.equal(actual, full):
            raise core.CheckFailure(mistake.message(exercise))
    wrong = (actual != expected).nonzero()
    first = tuple(wrong[0].tolist())
    raise core.CheckFailure(
        f"{exercise}: the mask has the right shape {letters} but {len(wrong)} of {actual.numel()} "
        f"entries are wrong, the first at index {list(first)}: expected {_describe(bool(expected[first]))}, "
        f"got {_describe(bool(actual[first]))}. {rule}"
    )


CAUSAL_RULE = "Row i is query i, column j is key j, and the mask is True exactly where j <= i."
PADDING_RULE = "The mask is True exactly where the token is not pad_id."
DECODER_RULE = "Entry [b, 0, i, j] is True exactly where key j <= query i and token j of row b is not pad_id."


def compare_causal(fn, size: int, expected: Expected | None = None) -> torch.Tensor:
    """The learner's causal_mask(size, device=DEVICE) against ``expected()`` (default: PyTorch's),
    computed after the learner's call."""
    core.expect_parameter(CAUSAL, fn, "device", "def causal_mask(size, device=None):")
    actual = core.call(CAUSAL, fn, size, device=DEVICE)
    right = expected_causal(size, DEVICE) if expected is None else expected()
    mistakes = core.mistake_outputs(CAUSAL_MISTAKES, size, DEVICE)
    compare_mask(CAUSAL, actual, right, CAUSAL_LETTERS, mistakes, CAUSAL_RULE)
    core.expect_device(CAUSAL, "the mask", actual, DEVICE)
    expect_built_on_the_device_asked(fn, size)
    return actual


# A device other than the checks' own: the mask's shape, dtype and device, and no values.
ELSEWHERE = torch.device("meta")


def expect_built_on_the_device_asked(fn, size: int) -> None:
    """causal_mask(size, device=meta) must give a mask on meta. The checks compute on the CPU, where
    a mask that ignores ``device`` is right; on a learner's GPU it then fails to meet the scores.
    A call that cannot run on meta (code that reads values) proves nothing and says nothing."""
    try:
        asked = fn(size, device=ELSEWHERE)
    except Exception:  # noqa: BLE001 - the learner's code, on a device it may not support
        return
    if isinstance(asked, torch.Tensor) and asked.device.type != ELSEWHERE.type:
        raise core.CheckFailure(
            f"{CAUSAL}: asked for a mask on another device (causal_mask({size}, device=torch.device("
            f"'{ELSEWHERE.type}'))), it gave one on {asked.device.type}: the device argument is not used. "
            "On a GPU the mask would then sit on the CPU beside scores on the GPU, and attention fails. "
            "Build it there: torch.ones(size, size, dtype=torch.bool, device=device).tril(), or pass "
            "device=device to whatever makes it."
        )


# what it likely means when the batch size meets the length in a shape error
BATCH_MEETS_LENGTH = (
    "tokens is [B, T], so the length is tokens.size(1) (tokens.size(0) is the batch): the causal "
    "part is causal_mask(T) [T, T], and it meets the padding part [B, 1, 1, T] on its last two axes"
)


def _run_tokens(exercise: str, fn, tokens: torch.Tensor, pad_id: int):
    """The learner's mask; a shape error names B and T."""
    letters = {"B": tokens.size(0), "T": tokens.size(1)}
    with shape_errors.sizes(letters, {("B", "T"): BATCH_MEETS_LENGTH}):
        return core.output(exercise, fn, {"tokens": tokens, "pad_id": pad_id}, "the mask")


# exercise -> what its tokens' mask is compared with: PyTorch's mask, the known mistakes, the
# mask's letters and the rule a wrong entry breaks
TOKEN_MASKS = {
    PADDING: (expected_padding, PADDING_MISTAKES, PADDING_LETTERS, PADDING_RULE),
    DECODER: (expected_decoder, DECODER_MISTAKES, DECODER_LETTERS, DECODER_RULE),
}


def _compare_token_mask(
    exercise: str, fn, tokens: torch.Tensor, pad_id: int, expected: Expected | None
) -> None:
    """The learner's ``exercise(tokens, pad_id)`` against ``expected()`` (default: PyTorch's),
    computed after the learner's call."""
    oracle, mistakes, letters, rule = TOKEN_MASKS[exercise]
    actual = _run_tokens(exercise, fn, tokens, pad_id)
    right = oracle(tokens, pad_id) if expected is None else expected()
    compare_mask(exercise, actual, right, letters, core.mistake_outputs(mistakes, tokens, pad_id), rule)
    core.expect_device(exercise, "the mask", actual, tokens.device)


def compare_padding(fn, tokens: torch.Tensor, pad_id: int, expected: Expected | None = None) -> None:
    """The learner's padding_mask(tokens, pad_id) against ``expected()`` (default: PyTorch's)."""
    _compare_token_mask(PADDING, fn, tokens, pad_id, expected)


def compare_decoder(fn, tokens: torch.Tensor, pad_id: int, expected: Expected | None = None) -> None:
    """The learner's decoder_mask(tokens, pad_id) against ``expected()`` (default: PyTorch's)."""
    _compare_token_mask(DECODER, fn, tokens, pad_id, expected)


def _check_form(exercise, actual, expected_shape, letters, mistakes, device) -> None:
    """Only the form of a mask: a tensor, boolean, of the expected shape, on the inputs' device."""
    actual = core.expect_tensor(exercise, "the mask", actual)
    dummy = torch.zeros(expected_shape, dtype=torch.bool, device=actual.device)
    if actual.dtype != torch.bool or actual.shape != dummy.shape:
        compare_mask(exercise, actual, dummy, letters, mistakes, "")
    if device is not None:
        core.expect_device(exercise, "the mask", actual, device)


# ---------------------------------------------------------------- the checks


def check_causal_mask_shape(fn) -> None:
    """causal_mask(T) is a boolean [T, T] tensor."""
    size = 6
    actual = core.call(CAUSAL, fn, size)
    mistakes = core.mistake_outputs(CAUSAL_MISTAKES, size, None)
    _check_form(CAUSAL, actual, (size, size), CAUSAL_LETTERS, mistakes, None)
    core.passed(f"{CAUSAL}({size}) is a boolean mask of shape [T, T] = [{size}, {size}]")


def check_causal_mask_values(fn) -> None:
    """Equal to PyTorch's causal mask (generate_square_subsequent_mask == 0), for T = 7 and T = 1,
    on the device it is asked for."""
    compare_causal(fn, 7)
    compare_causal(fn, 1)
    core.passed(
        f"{CAUSAL} equals torch's nn.Transformer.generate_square_subsequent_mask(T) == 0: "
        "True where key j <= query i"
    )


def check_padding_mask_shape(fn) -> None:
    """padding_mask(tokens [B, T], pad_id) is a boolean [B, 1, 1, T] tensor on the tokens' device."""
    tokens = tokens_tensor(TOKENS_PAD_0)
    actual = _run_tokens(PADDING, fn, tokens, 0)
    mistakes = core.mistake_outputs(PADDING_MISTAKES, tokens, 0)
    b, t = tokens.shape
    _check_form(PADDING, actual, (b, 1, 1, t), PADDING_LETTERS, mistakes, tokens.device)
    core.passed(f"{PADDING} is a boolean mask of shape [B, 1, 1, T] = [{b}, 1, 1, {t}]")


def check_padding_mask_values(fn) -> None:
    """Equal to the negation of nn.MultiheadAttention's key_padding_mask, for pad_id 0 and pad_id 2,
    on rows with different amounts of padding."""
    compare_padding(fn, tokens_tensor(TOKENS_PAD_0), 0)
    compare_padding(fn, tokens_tensor(TOKENS_PAD_2), 2)
    core.passed(f"{PADDING} is True exactly at the real tokens, for pad_id = 0 and pad_id = 2")


def check_decoder_mask_shape(fn) -> None:
    """decoder_mask(tokens [B, T], pad_id) is a boolean [B, 1, T, T] tensor on the tokens' device."""
    tokens = tokens_tensor(TOKENS_PAD_0)
    actual = _run_tokens(DECODER, fn, tokens, 0)
    mistakes = core.mistake_outputs(DECODER_MISTAKES, tokens, 0)
    b, t = tokens.shape
    _check_form(DECODER, actual, (b, 1, t, t), DECODER_LETTERS, mistakes, tokens.device)
    core.passed(f"{DECODER} is a boolean mask of shape [B, 1, T, T] = [{b}, 1, {t}, {t}]")


def check_decoder_mask_values(fn) -> None:
    """Equal to PyTorch's tgt_mask and tgt_key_padding_mask combined, for pad_id 0 and pad_id 2."""
    compare_decoder(fn, tokens_tensor(TOKENS_PAD_0), 0)
    compare_decoder(fn, tokens_tensor(TOKENS_PAD_2), 2)
    core.passed(f"{DECODER} blocks both the future and the padding, for pad_id = 0 and pad_id = 2")


CATALOGUE = {CAUSAL: CAUSAL_MISTAKES, PADDING: PADDING_MISTAKES, DECODER: DECODER_MISTAKES}
