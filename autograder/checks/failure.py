"""How a failed check reaches the learner: ``CheckFailure``, shown as its message alone."""

import re
import textwrap
import traceback


class CheckFailure(AssertionError):
    """A check failed. The message says what was expected, what was seen, and where to look.

    In a notebook it shows as that message alone, not as a traceback through the
    checks library; when the learner's own code crashed, the learner's frames follow.
    """

    def _render_traceback_(self) -> list[str]:  # IPython calls this to display the error
        lines = wrap_message(f"CheckFailure: {self}")
        cause = self.__cause__
        if cause is not None and not isinstance(cause, NotImplementedError):
            frames = traceback.extract_tb(cause.__traceback__)
            learner = [frame for frame in frames if "autograder" not in frame.filename]
            lines += ["", "Where your code raised it:"]
            lines += traceback.format_list(learner[-3:]) + traceback.format_exception_only(cause)
        return lines


# A `code span` in a message: it is wrapped as one word, so that `raise NotImplementedError()`
# never breaks across two lines.
CODE_SPAN = re.compile(r"`[^`]*`")
NO_BREAK = "\x00"  # stands for a space inside a code span while the message is wrapped


def wrap_message(message: str, width: int = 100) -> list[str]:
    """``message`` in lines of at most ``width`` characters (a longer code span gets its own
    line), continued lines indented, never broken inside a `code span`."""
    joined = CODE_SPAN.sub(lambda span: span[0].replace(" ", NO_BREAK), message)
    lines = textwrap.wrap(
        joined, width=width, subsequent_indent="    ", break_long_words=False, break_on_hyphens=False
    )
    return [line.replace(NO_BREAK, " ") for line in lines]
