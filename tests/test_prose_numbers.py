"""The lessons' prose quotes no measured number that the notebook does not show.

A number with a unit (ms, s, µs, %, MiB, ...), a ratio such as "6.2x", or a fitted exponent such
as "L^1.49" in a markdown cell is a claim about a run. It goes stale the moment the lesson is
rebuilt on another machine, so the prose may hold one only when it is supported:

- **printed by a cell**: the same value and unit appear in the notebook's outputs (the prose may
  round, "12 ms" for a printed "11.6 ms"). The source notebook (solutions/lessons/) carries the
  outputs of its last build. The learner's notebook (course/) carries none: there only the outputs
  a learner's run reproduces count, those of cells that nbval compares, after
  tests/nbval_sanitize.cfg has replaced the timings. So the shared prose can quote a count or a
  fitted memory exponent, never a timing: it says "the output above shows" instead;
- **a stated range**: "between 5 and 20 ms", "16 to 18 s", "5–20 ms". Its ends must be round
  numbers (two significant digits at most): a range any machine can satisfy is round, and a
  precise pair such as "1.01–7.65x" is a measurement wearing a range's clothes;
- **an entry of ALLOWED**: a constant of the math or of the code, with the reason it is one.

The learner's notebook also may not say "the run shown": it shows no run.
"""

import configparser
import math
import re
from pathlib import Path

import nbformat
import pytest

from autograder import lessons

ROOT = Path(__file__).resolve().parent.parent
SANITIZE = ROOT / "tests" / "nbval_sanitize.cfg"
IGNORE_OUTPUT = "nbval-ignore-output"

# "x" and "×" before a number make a product or a shape ("5000 × 512", "1.1 × 10^12", "2x2"), not a ratio
UNITS = r"ms|µs|us|ns|s|seconds|%|KiB|MiB|GiB|kB|KB|MB|GB|(?:x|×)(?!\s*\d)"
NUMBER = r"(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?"  # 12, 0.5, 57,600
# a number and its unit, "12 ms", "95.5%", "6.2x"; not the start of a word ("4 steps")
WITH_UNIT = re.compile(rf"(?<![\w.^])(?P<value>{NUMBER})\s?(?P<unit>{UNITS})(?![\w])")
# a fitted exponent: "L^1.49", "n^{2.59}" (integer exponents, n^2, are the math's own)
EXPONENT = re.compile(r"(?<![A-Za-z])[A-Za-z]\^\{?(?P<value>\d+\.\d+)\}?")
# a stated range: "between 5 and 20 ms", "16 to 18 s", "5–20 ms", "1.6 to 1.8"
RANGE = re.compile(
    rf"(?:between\s+)?(?P<low>{NUMBER})\s?(?:{UNITS})?\s*(?:and|to|–|-)\s*(?P<high>{NUMBER})\s?(?:{UNITS})"
)
RUN_SHOWN = re.compile(r"the runs? shown", re.IGNORECASE)

# (lesson, the prose's text of the claim) -> why it is a constant, not a measurement
ALLOWED: dict[tuple[str, str], str] = {
    ("02_positional_encoding", "10 MB"): "5000 x 512 float32 numbers: the table's size, computed beside it",
    ("04_masking", "6x"): "one mask against six (one per layer): the count the timing is compared with",
    ("05_multi_head", "2x"): "a doubling of T doubles the linear terms: the math's ratio",
    ("05_multi_head", "4x"): "a doubling of T quadruples the T^2 terms: the math's ratio",
    ("06_layer_norm", "2x"): "a doubling of T doubles the linear work: the math's ratio",
    ("06_layer_norm", "8 MiB"): "the activations' size at T = 1024, from the shapes in the text",
    ("08_encoder_decoder", "4x"): "a doubling of T quadruples B h T^2: the math's ratio",
    ("10_training", "100%"): "the held-out score at which training stops: Config's criterion",
    ("10_training", "64%"): "1 - 0.95^20, the EMA's arithmetic, which a cell also prints",
    ("11_efficiency", "0.2 s"): "min_run_time=0.2, the timing cell's own setting",
    ("11_efficiency", "0.3 s"): "min_run_time=0.3, the timing cell's own setting",
    ("11_efficiency", "0.1 s"): "a call longer than a third of min_run_time=0.3 s: the setting's arithmetic",
    ("11_efficiency", "16 MiB"): "4 h n^2 bytes at n = 1024, h = 4: the formula beside it",
    ("11_efficiency", "1.5 MiB"): "4 * 3nD bytes at n = 1024, D = 128: the formula beside it",
    ("11_efficiency", "64 MiB"): "4 h n^2 bytes at n = 2048, h = 4: the formula beside it",
    ("11_efficiency", "4 GiB"): "4 h n^2 bytes at n = 16384, h = 4: the formula beside it",
    ("11_efficiency", "12 MiB"): "24 KiB per token (printed) times 512 tokens: the formula beside it",
    ("11_efficiency", "1.5 GiB"): "12 MiB times 128 sequences: the formula beside it",
    ("11_efficiency", "4 KiB"): "the size of a memory page on x86-64 and most ARM systems",
}


def _normalise(markdown: str) -> str:
    """Markdown as a reader sees its numbers: LaTeX spacing, \\text{} and \\% undone."""
    text = re.sub(r"\\text\{([^}]*)\}", r"\1", markdown)
    text = re.sub(r"\\[,;!]|\\ ", " ", text)
    text = text.replace("\\%", "%").replace("\\times", "×").replace("{,}", ",")
    return re.sub(r"(\d) (\d{3})(?!\d)", r"\1\2", text)  # "16 384" (LaTeX's thin space) is one number


def _value(text: str) -> float:
    return float(text.replace(",", ""))


def _unit(unit: str) -> str:
    return {"×": "x", "us": "µs", "seconds": "s", "KB": "kB"}.get(unit, unit)


def claims(markdown: str) -> list[tuple[str, float, str, int]]:
    """Every (text, value, unit, decimals) the prose states outside code, ranges and allowed text."""
    text = _normalise(re.sub(r"`[^`]*`", " ", markdown))
    in_ranges = set()
    for match in RANGE.finditer(text):
        low, high = match["low"], match["high"]
        if _round(low) and _round(high):
            in_ranges.update(range(match.start(), match.end()))
    found = []
    for pattern in (WITH_UNIT, EXPONENT):
        for match in pattern.finditer(text):
            if match.start("value") in in_ranges:
                continue
            unit = _unit(match["unit"]) if pattern is WITH_UNIT else "^"
            decimals = len(match["value"].partition(".")[2])
            found.append((match.group(0).strip(), _value(match["value"]), unit, decimals))
    return found


def _round(number: str) -> bool:
    """At most two significant digits: 5, 20, 0.5, 1.6, 400 (a round figure, not a measurement)."""
    digits = number.replace(",", "").replace(".", "").strip("0")
    return len(digits) <= 2


def printed(outputs: str) -> set[tuple[float, str]]:
    """Every (value, unit) the outputs print, exponents included."""
    found = {(_value(m["value"]), _unit(m["unit"])) for m in WITH_UNIT.finditer(outputs)}
    return found | {(_value(m["value"]), "^") for m in EXPONENT.finditer(outputs)}


def supported(value: float, unit: str, decimals: int, shown: set[tuple[float, str]]) -> bool:
    """The prose's figure is a printed one, rounded to the prose's decimals."""
    return any(
        unit == shown_unit and math.isclose(round(shown_value, decimals), value, abs_tol=1e-9)
        for shown_value, shown_unit in shown
    )


def _sanitisers() -> list[tuple[re.Pattern, str]]:
    config = configparser.ConfigParser()
    config.read(SANITIZE, encoding="utf-8")
    return [(re.compile(config[name]["regex"]), config[name]["replace"]) for name in config.sections()]


def output_text(nb: nbformat.NotebookNode, reproduced_only: bool) -> str:
    """What the notebook's cells print; only what a learner's run reproduces when asked."""
    parts = []
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        if reproduced_only and IGNORE_OUTPUT in cell.metadata.get("tags", []):
            continue
        for output in cell.get("outputs", []):
            parts.append(output.get("text", "") or output.get("data", {}).get("text/plain", ""))
    text = "\n".join(parts)
    if reproduced_only:
        for pattern, replacement in _sanitisers():
            text = pattern.sub(replacement, text)
    return text


def unsupported(lesson: str, nb: nbformat.NotebookNode, shown: str) -> list[str]:
    numbers = printed(shown)
    problems = []
    for index, cell in enumerate(nb.cells):
        if cell.cell_type != "markdown":
            continue
        for text, value, unit, decimals in claims(cell.source):
            if (lesson, text) in ALLOWED or supported(value, unit, decimals, numbers):
                continue
            problems.append(f"cell {index}: {text!r}")
    return problems


def _learner_notebook(lesson: str) -> Path:
    return ROOT / "course" / lesson / lessons.source_path(lesson).name


@pytest.mark.parametrize("lesson", lessons.written_lessons())
def test_source_prose_quotes_only_what_its_outputs_show(lesson):
    nb = nbformat.read(lessons.source_path(lesson), as_version=4)
    problems = unsupported(lesson, nb, output_text(nb, reproduced_only=False))
    assert not problems, (
        f"{lessons.source_path(lesson)}: the prose quotes figures its outputs do not show "
        f"(print them, say 'the output above', state a round range, or allow a constant): {problems}"
    )


@pytest.mark.parametrize("lesson", lessons.written_lessons())
def test_learner_prose_quotes_only_what_a_learner_run_shows(lesson):
    source = nbformat.read(lessons.source_path(lesson), as_version=4)
    learner = nbformat.read(_learner_notebook(lesson), as_version=4)
    problems = unsupported(lesson, learner, output_text(source, reproduced_only=True))
    problems += [
        f"cell {index}: says {match.group(0)!r}, but the learner's notebook shows no run"
        for index, cell in enumerate(learner.cells)
        if cell.cell_type == "markdown"
        for match in RUN_SHOWN.finditer(cell.source)
    ]
    assert not problems, (
        f"{_learner_notebook(lesson)}: its prose quotes figures a learner's run does not reproduce "
        f"(timings, or outputs nbval does not compare): {problems}"
    )


def test_a_stale_timing_is_found_and_a_printed_one_is_not():
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_markdown_cell("The loop's step took 214 ms, 6.2x faster, time grows as $L^{1.49}$."),
        nbformat.v4.new_markdown_cell("It took 12 ms (between 5 and 20 ms on a laptop), $n^2$, $D = 512$."),
    ]
    shown = "12 ms a step\nfitted exponents: L^1.82"
    assert unsupported("demo", nb, shown) == ["cell 0: '214 ms'", "cell 0: '6.2x'", "cell 0: 'L^{1.49}'"]


def test_a_precise_pair_is_not_a_range():
    assert [text for text, *_ in claims("speed-ups of 1.01–7.65x")] == ["7.65x"]
    assert claims("between 5 and 20 ms, 16 to 18 s, 1.6 to 1.8x") == []
