"""How long, in words: '42 s', '3 min 5 s', '10 h 31 min', '3 days 2 h'.

One spelling for every interval the course prints: the time left in a grading run
(``pipeline``) and how late a hand-in was (``instructor/late``). The two largest units are
enough for a person reading at a glance; the seconds are rounded up, so that a hand-in one
second late never reads as on time.
"""

import math

UNITS = (("day", 24 * 3600), ("h", 3600), ("min", 60), ("s", 1))


def in_words(seconds: float) -> str:
    """The two largest non-zero units of ``seconds`` rounded up ('0 s' for none)."""
    left = max(0, math.ceil(seconds))
    parts = []
    for name, size in UNITS:
        count, left = divmod(left, size)
        if count:
            parts.append(f"{count} {name}{'s' if name == 'day' and count != 1 else ''}")
    return " ".join(parts[:2]) or "0 s"
