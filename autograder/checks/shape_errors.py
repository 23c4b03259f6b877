"""A learner's crash in the lesson's words: which sizes failed to meet, by the lesson's letters
(``sizes``, read by ``core.call``), and which operation left a tensor that ``.view`` refuses not
contiguous."""

import contextlib
import contextvars
import re
import traceback
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

NOT_CONTIGUOUS = (
    "{exercise}: .view() failed because {tensor} is not contiguous in memory: {made}. Call "
    ".contiguous() before .view(...), or use .reshape(...), which copies when it has to."
)
# the operations that only change a tensor's strides (no data moved), as they are written before .view
STRIDES_ONLY = re.compile(
    r"\.(?:transpose|permute|swapaxes|swapdims|movedim|t|T|mT|mH|expand|expand_as|narrow|unfold)\b"
    r"(?:\([^()]*\))?|\[[^\[\]]*:[^\[\]]*\]"
)
STRIDES_ONLY_TEXT = (
    "(a transpose, a permute, an expand or a slice such as [:, 1:] only changes the strides, "
    "it moves no data)"
)


def _view_receiver(error: BaseException) -> str | None:
    """The expression ``.view(...)`` was called on, as the innermost line of the traceback that
    calls .view writes it ('x.transpose(1, 2)'), or None when no line shows it."""
    for frame in reversed(traceback.extract_tb(error.__traceback__)):
        line = frame.line or ""
        end = line.find(".view(")
        if end < 0:
            continue
        depth, start = 0, end
        while start > 0:
            char = line[start - 1]
            if char in ")]":
                depth += 1
            elif char in "([":
                if depth == 0:
                    break
                depth -= 1
            elif depth == 0 and not (char.isalnum() or char in "_.'\""):
                break
            start -= 1
        return line[start:end][-80:] or None
    return None


def not_contiguous(exercise: str, error: BaseException) -> str:
    """The message for a .view on a tensor that is not contiguous: the operation that made it so,
    when the line that calls .view shows one, else that it is not known."""
    receiver = _view_receiver(error)
    if receiver is None:
        made = f"which operation made it so is not known here {STRIDES_ONLY_TEXT}"
        return NOT_CONTIGUOUS.format(exercise=exercise, tensor="its tensor", made=made)
    makers = [found.group(0) for found in STRIDES_ONLY.finditer(receiver)]
    if makers:
        made = f"{makers[-1]} only changes the strides, it moves no data"
    else:
        made = f"this line does not show which operation made it so {STRIDES_ONLY_TEXT}"
    return NOT_CONTIGUOUS.format(exercise=exercise, tensor=f"`{receiver}`", made=made)


@dataclass(frozen=True)
class Sizes:
    """The sizes of the axes in the check being run, by the lesson's letters ({'T_src': 7, ...}),
    and what it likely means when two of them meet in a shape error: a pair of letters (in
    either order) -> a cause in the lesson's words."""

    letters: Mapping[str, int]
    causes: Mapping[tuple[str, str], str]

    def named(self, size: int) -> list[str]:
        return [letter for letter, value in self.letters.items() if value == size]

    def cause(self, first: int, second: int) -> str | None:
        for a in self.named(first):
            for b in self.named(second):
                found = self.causes.get((a, b)) or self.causes.get((b, a))
                if found:
                    return found
        return None


_SIZES: contextvars.ContextVar[Sizes | None] = contextvars.ContextVar("sizes", default=None)


@contextlib.contextmanager
def sizes(letters: Mapping[str, int], causes: Mapping[tuple[str, str], str] | None = None) -> Iterator[None]:
    """Inside the block, a shape error raised by the learner's code (``call``) names the sizes
    that did not match by the lesson's letters, and a likely cause when ``causes`` has one."""
    token = _SIZES.set(Sizes(dict(letters), dict(causes or {})))
    try:
        yield
    finally:
        _SIZES.reset(token)


# PyTorch's words for two sizes that cannot meet: (pattern, the groups of the two sizes)
SHAPE_ERRORS = (
    (re.compile(r"size of tensor a \((\d+)\) must match the size of tensor b \((\d+)\)"), (1, 2)),
    (re.compile(r"expanded size of the tensor \((\d+)\) must match the existing size \((\d+)\)"), (1, 2)),
    (re.compile(r"shapes cannot be multiplied \((\d+)x(\d+) and (\d+)x(\d+)\)"), (2, 3)),
    (re.compile(r"batch2 tensor to be: \[\d+, (\d+)\] but got: \[\d+, (\d+)\]"), (1, 2)),  # a batched @
    (
        re.compile(
            r"has size (\d+) for operand \d+ which does not broadcast with previously seen size (\d+)"
        ),
        (1, 2),
    ),
)


# torch.broadcast_shapes: one size, the axis, and the shape it should have broadcast to
BROADCAST_SHAPES_ERROR = re.compile(
    r"broadcast a dimension of length (\d+) at (-?\d+)!.* should be broadcastable to \[([\d, ]*)\]"
)
# the course's own attention (lesson 03) refusing a mask: its shape and the scores'
MASK_ERROR = re.compile(
    r"mask of shape \[([\d, ]*)\] does not broadcast to the scores \[[^\]]*\] = \[([\d, ]*)\]"
)


def mismatched_sizes(error: BaseException) -> tuple[int, int] | None:
    """The two sizes a broadcast, an expand or a matrix product could not make meet (for a mask
    that attention refused: the mask's, then the scores'), or None."""
    for pattern, groups in SHAPE_ERRORS:
        found = pattern.search(str(error))
        if found:
            return int(found[groups[0]]), int(found[groups[1]])
    found = BROADCAST_SHAPES_ERROR.search(str(error))
    if found:
        shape = [int(n) for n in found[3].split(",") if n.strip()]
        if -len(shape) <= int(found[2]) < len(shape):
            return int(found[1]), shape[int(found[2])]
    found = MASK_ERROR.search(str(error))
    if found:
        mask, scores = ([int(n) for n in group.split(",") if n.strip()] for group in found.groups())
        for size, score in zip(reversed(mask), reversed(scores), strict=False):  # aligned on the right
            if size not in (1, score):
                return size, score
    return None


def sizes_clause(error: BaseException) -> str:
    """'. In this check 7 is T_src and 5 is T_tgt: ...' for a shape error inside ``sizes``, else ''."""
    known, pair = _SIZES.get(), mismatched_sizes(error)
    if known is None or pair is None:
        return ""
    names = [" or ".join(known.named(size)) for size in pair]
    if not all(names):
        return ""
    clause = f". In this check {pair[0]} is {names[0]} and {pair[1]} is {names[1]}"
    cause = known.cause(*pair)
    return f"{clause}: {cause}" if cause else f"{clause}, two axes that should not meet"


def error_key(error: BaseException) -> tuple[str, str]:
    """An error's type and message, with the operands of a broadcast error in a fixed order
    (a + b and b + a fail with the same sizes, named the other way round)."""
    broadcast = SHAPE_ERRORS[0][0]
    text = broadcast.sub(lambda m: f"sizes {sorted((int(m[1]), int(m[2])))}", str(error))
    return type(error).__name__, text
