"""Text a submission produced, made fit to show on one line of a report or a terminal.

What a learner's code raises or prints, the names of the files its kernel leaves, the names of
the folders and files an upload brings: all of it is hostile text (principle 9 of the design).
Shown as it is, it moves a terminal's cursor and erases the lines above (``ESC [1A ESC [2K``),
sets the window's title (an OSC sequence), or starts lines of its own that read as the
grader's: a made-up "No problems" line, or a line about another student.

``one_line`` keeps every printable character and writes each other one (control characters,
line and paragraph breaks, bidirectional overrides and the other format characters) as its
Python escape (``\\x1b``, ``\\n``, ``\\u202e``): the text stays on the one line it was given,
and still shows what it held. ``report_line`` does the same and keeps at most ``MAX_CHARS``.
Both give back what they are given when it is already clean, so applying them twice changes
nothing.
"""

# The most a line of the instructor's report holds of one text; the longest line the engine
# writes itself (a check's message, the roster report) is a few hundred characters.
MAX_CHARS = 1000


def one_line(text: str) -> str:
    """``text`` with every character that is not printable written as its Python escape."""
    if text.isprintable():
        return text
    return "".join(
        char if char.isprintable() else char.encode("unicode_escape").decode("ascii") for char in text
    )


def report_line(text: str) -> str:
    """``one_line(text)``, its middle left out (and said so) when it is over ``MAX_CHARS``."""
    line = one_line(text)
    if len(line) <= MAX_CHARS:
        return line
    keep = (MAX_CHARS - 60) // 2  # room for the note, so that a second pass keeps it whole
    return f"{line[:keep]} ... ({len(line) - 2 * keep:,} characters left out) ... {line[-keep:]}"
