"""Pairs of learners whose solutions are alike, per lesson, for a person to look at.

For each lesson, everything a learner handed in (every code cell of every notebook of theirs for
the lesson, in order: the solution cells, and the cells they added, where a copy earns the same
points as in a solution cell) is compared with every other learner's by winnowing, the method of
MOSS, as the library ``copydetect`` implements it: the code is tokenised, names become one
letter and comments vanish, so renamed variables and changed comments do not hide a copy, and
every run of NOISE_CHARS characters of that text is a fingerprint. Fingerprints of the released
notebook's code (the stubs, the tests, the experiments) and of the reference's are boilerplate
and never count (a cell handed in as the template or the reference has it is left out, and not
shown): a learner who handed in the bare stubs or the reference's exact code is alike to nobody
through them, and one who handed in nothing else is in no pair.

Why the lesson and not each exercise: most exercises are a few lines, and the few idioms that
solve them (``tokens != pad_id``, a ``tril`` of ones) recur among honest learners; a single short
function matched would accuse them. Over a whole lesson only a shared way of writing most of it
reaches the threshold.

It reads the workspace only (nothing is graded, nothing is changed) and writes two files: a
table of every pair compared, and an offline page that shows the most similar pairs side by side
with the matched code marked. Learners' code is hostile text: every piece of it is HTML-escaped,
and the page's Content-Security-Policy forbids scripts. A flag asks a person to look; it is
never a verdict.
"""

import html
import io
import itertools
import re
from dataclasses import dataclass, field
from pathlib import Path

import nbformat
import numpy as np
from copydetect import CodeFingerprint, compare_files
from copydetect.utils import filter_code, get_token_coverage

from autograder.engine import csv_files
from autograder.engine.intake import MAX_NOTEBOOK_BYTES, STUDENT_ID
from autograder.engine.plain_text import one_line
from autograder.lessons import LESSON_NAMES, SOURCE

# The shortest run of (tokenised) code that counts as a match, in characters: copydetect's default.
NOISE_CHARS = 25
# A pair is flagged from this share of either learner's fingerprinted code matched by the other's.
# Measured on six generated classes of 24 learners on lessons 05 and 10 (tests/similarity_class.py):
# independent pairs reached 0.70 to 0.90 at most (median 0.2 to 0.37), planted copies (renamed,
# statements swapped, comments changed) 0.77 to 1.0 at least, most above 0.88.
THRESHOLD = 0.9
# Between two cells of a learner's code, in the table and on the page.
SEPARATOR = "\n\n"
# The page shows every flagged pair of a lesson, and at least this many of its most similar.
SHOWN_PER_LESSON = 10
# What the page may load and run: nothing but its own inline styles.
POLICY = "default-src 'none'; style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'"


@dataclass(frozen=True)
class Pair:
    """Two learners' code for one lesson; ``similarity`` is the larger of the two shares of each
    learner's fingerprinted code that the other's matches (0 to 1)."""

    lesson: str
    student_a: str
    student_b: str
    similarity: float
    flagged: bool


@dataclass
class Report:
    """Every pair compared (most similar first), what could not be read, and the files written."""

    pairs: list[Pair]
    problems: list[str]
    page: Path
    table: Path
    threshold: float

    @property
    def flagged(self) -> list[Pair]:
        return [pair for pair in self.pairs if pair.flagged]

    def summary(self) -> str:
        """A few lines for the terminal: what was compared, what is flagged, where to look."""
        lines = [f"{len(self.pairs)} pairs compared; {len(self.flagged)} at or above {self.threshold:.2f}:"]
        lines += [f"  {p.lesson}: {p.student_a} and {p.student_b} ({p.similarity:.0%})" for p in self.flagged]
        lines += [f"  not compared: {one_line(problem)}" for problem in self.problems]  # names from uploads
        lines.append(f"side by side: {self.page}\nevery pair: {self.table}")
        return "\n".join(lines)


@dataclass
class _Lesson:
    """One lesson's learners' code (student -> their code cells) and its boilerplate fingerprints."""

    name: str
    codes: dict[str, list[str]] = field(default_factory=dict)
    boilerplate: set[int] = field(default_factory=set)


SOLUTION_MARKER = re.compile(r"### (BEGIN|END) SOLUTION")


def _code_cells(path: Path) -> list[str]:
    """The source of every code cell of a notebook, in order, whatever its metadata says."""
    cells = nbformat.read(path, as_version=4).cells
    return [
        cell.source
        for cell in cells
        if cell.get("cell_type") == "code" and isinstance(cell.get("source"), str)
    ]


def _as_handed_in(reference: str) -> str:
    """The reference's cell as a learner who wrote it would hand it in: without nbgrader's solution
    markers, which in lesson 12 sit inside the C++ string (``// ### BEGIN SOLUTION``), where the
    tokenizer keeps them, so that the reference would otherwise not match its own copy."""
    return "\n".join(line for line in reference.splitlines() if not SOLUTION_MARKER.search(line))


def _fingerprint(cells: list[str], boilerplate: set[int]) -> CodeFingerprint:
    """copydetect's fingerprint of the cells joined (every k-gram, no winnowing window: the same
    every run), without the boilerplate's fingerprints and without the k-grams that span two
    cells (a stub followed by the reference's next cell would otherwise match everyone's)."""
    whole = CodeFingerprint(
        "solution.py", NOISE_CHARS, 1, fp=io.StringIO(SEPARATOR.join(cells)), language="python"
    )
    ends = np.cumsum([len(filter_code(cell, "cell.py", "python")[0]) for cell in cells])
    spanning = {start for end in ends[:-1] for start in range(max(0, end - NOISE_CHARS + 1), end)}
    for hash_value in list(whole.hashes):
        kept = [start for start in whole.hash_idx[hash_value] if start not in spanning]
        if hash_value in boilerplate or not kept:
            whole.hashes.discard(hash_value)
            del whole.hash_idx[hash_value]
        else:
            whole.hash_idx[hash_value] = kept
    whole.token_coverage = get_token_coverage(whole.hash_idx, NOISE_CHARS, len(whole.filtered_code))
    return whole


def _read_lesson(workspace: Path, lesson: str, problems: list[str]) -> _Lesson:
    """The code of the lesson's released notebooks and of the reference as boilerplate, and
    everything each learner handed in for it."""
    found = _Lesson(lesson)
    released = sorted((workspace / "release" / lesson).glob("*.ipynb"))
    template: set[str] = set()  # the cells as released or as the reference has them
    for notebook in released:
        reference = SOURCE / lesson / notebook.name
        references = _code_cells(reference) if reference.is_file() else []
        template |= {*_code_cells(notebook), *map(_as_handed_in, references)}
    for code in sorted(template):
        found.boilerplate |= CodeFingerprint(
            "boilerplate.py", NOISE_CHARS, 1, fp=io.StringIO(code), language="python"
        ).hashes
    names = {notebook.name for notebook in released}
    for folder in sorted((workspace / "submitted").glob(f"*/{lesson}")):
        student = folder.parent.name
        if not STUDENT_ID.fullmatch(student):
            problems.append(f"{student!r} / {lesson}: not a student id (letters, digits, . _ -)")
            continue
        parts = []
        # the released notebooks first, then any other the learner handed in (a cell may %run it)
        for notebook in sorted(folder.glob("*.ipynb"), key=lambda path: (path.name not in names, path.name)):
            if notebook.stat().st_size > MAX_NOTEBOOK_BYTES:
                what = f"{notebook.name} is over {MAX_NOTEBOOK_BYTES >> 20} MiB"
                problems.append(f"{student} / {lesson}: {what}")
                continue
            try:  # a cell as the template has it is all boilerplate: left out, and off the page
                parts += [code for code in _code_cells(notebook) if code not in template]
            except Exception as error:  # noqa: BLE001 - json, nbformat and encoding errors alike
                what = f"{notebook.name} is not a readable notebook ({type(error).__name__})"
                problems.append(f"{student} / {lesson}: {what}")
        if parts:
            found.codes[student] = parts
    return found


def _compare(found: _Lesson, threshold: float) -> tuple[list[Pair], dict[tuple[str, str], tuple]]:
    """Every pair of the lesson's learners, and the matched slices of each pair that matched."""
    prints = {student: _fingerprint(code, found.boilerplate) for student, code in found.codes.items()}
    pairs, slices = [], {}
    for a, b in itertools.combinations(sorted(prints), 2):
        _, shares, matched = compare_files(prints[a], prints[b])
        share = float(max(shares))
        pairs.append(Pair(found.name, a, b, round(share, 4), share >= threshold))
        if share > 0:
            slices[a, b] = matched
    return pairs, slices


def _marked(code: str, slices: np.ndarray) -> str:
    """``code`` HTML-escaped, with the matched slices (starts in row 0, ends in row 1) in <mark>."""
    pieces, done = [], 0
    for start, end in zip(*slices.astype(int).tolist(), strict=True):
        start, end = max(start, done), min(end, len(code))
        if start >= end:
            continue
        pieces += [html.escape(code[done:start]), "<mark>", html.escape(code[start:end]), "</mark>"]
        done = end
    pieces.append(html.escape(code[done:]))
    return "".join(pieces)


STYLE = """
body { font-family: system-ui, sans-serif; margin: 1.5rem; color: #1d1d1f; }
table.pairs { border-collapse: collapse; margin: 0.5rem 0 1rem; }
table.pairs td, table.pairs th { border: 1px solid #ccc; padding: 0.2rem 0.6rem; text-align: left; }
tr.flagged td { background: #fff1e0; }
.side { display: grid; grid-template-columns: minmax(0, 1fr) minmax(0, 1fr); gap: 0.8rem; }
.side h4 { margin: 0.3rem 0; }
pre { background: #f6f6f6; padding: 0.6rem; overflow-x: auto; font-size: 0.8rem; white-space: pre; }
mark { background: #ffd27a; }
details { margin-bottom: 1rem; border-top: 1px solid #ddd; padding-top: 0.4rem; }
summary { cursor: pointer; font-weight: 600; }
"""


def _page(
    report_pairs: list[Pair], codes: dict[str, dict[str, list[str]]], slices: dict, threshold: float
) -> str:
    """The offline page: per lesson, a table of its most similar pairs, then each side by side."""
    esc = html.escape
    parts = [
        "<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'>",
        f'<meta http-equiv="Content-Security-Policy" content="{POLICY}">',
        f"<title>Similar solutions</title><style>{STYLE}</style></head><body>",
        "<h1>Similar solutions</h1>",
        f"<p>Pairs of learners whose solution code for a lesson is alike, after names, comments and "
        f"the released stubs and the reference are set aside. A pair at or above {threshold:.0%} is "
        "flagged for a person to look at: it is not a verdict, and no grade depends on it. Matched "
        "code is marked.</p>",
    ]
    for lesson in dict.fromkeys(pair.lesson for pair in report_pairs):
        ranked = [pair for pair in report_pairs if pair.lesson == lesson]
        shown = [p for i, p in enumerate(ranked) if (p.flagged or i < SHOWN_PER_LESSON) and p.similarity > 0]
        flagged = sum(p.flagged for p in ranked)
        parts.append(f"<h2>{esc(lesson)}</h2><p>{len(ranked)} pairs compared, {flagged} flagged.</p>")
        if not shown:
            continue
        parts.append(
            "<table class='pairs'><tr><th>#</th><th>learner</th><th>learner</th><th>similarity</th></tr>"
        )
        for rank, pair in enumerate(shown, 1):
            parts.append(
                f"<tr class='{'flagged' if pair.flagged else ''}'>"
                f"<td><a href='#{esc(lesson)}-{rank}'>{rank}</a></td>"
                f"<td>{esc(pair.student_a)}</td><td>{esc(pair.student_b)}</td>"
                f"<td>{pair.similarity:.0%}{' flagged' if pair.flagged else ''}</td></tr>"
            )
        parts.append("</table>")
        for rank, pair in enumerate(shown, 1):
            slices_a, slices_b = slices[lesson, pair.student_a, pair.student_b]
            parts.append(
                f"<details id='{esc(lesson)}-{rank}'{' open' if pair.flagged else ''}><summary>{rank}. "
                f"{esc(pair.student_a)} and {esc(pair.student_b)}: {pair.similarity:.0%}</summary>"
                "<div class='side'>"
            )
            for student, matched in ((pair.student_a, slices_a), (pair.student_b, slices_b)):
                code = _marked(SEPARATOR.join(codes[lesson][student]), matched)
                parts.append(f"<div><h4>{esc(student)}</h4><pre><code>{code}</code></pre></div>")
            parts.append("</div></details>")
    parts.append("</body></html>\n")
    return "\n".join(parts)


def similarity(
    workspace: Path, lessons: list[str] | None = None, threshold: float = THRESHOLD, out: Path | None = None
) -> Report:
    """Compare the learners' solutions of each lesson pairwise (every released lesson, or those
    asked), and write ``similarity.csv`` and ``index.html`` into ``out`` (default:
    ``<workspace>/similarity/``). Reads the workspace only; changes no grade."""
    if not 0 < threshold <= 1:
        raise ValueError(f"the threshold is a share of the code, above 0 and at most 1; got {threshold}")
    released = [name for name in LESSON_NAMES if (workspace / "release" / name).is_dir()]
    for name in lessons or []:
        if name not in released:
            raise ValueError(
                f"{name!r} is not a released lesson of {workspace}: "
                f"expected one of {', '.join(released) or 'none (nothing in release/)'}"
            )
    problems: list[str] = []
    pairs: list[Pair] = []
    slices: dict = {}
    codes: dict[str, dict[str, list[str]]] = {}
    for lesson in lessons or released:
        found = _read_lesson(workspace, lesson, problems)
        lesson_pairs, lesson_slices = _compare(found, threshold)
        pairs += sorted(lesson_pairs, key=lambda pair: -pair.similarity)
        slices.update({(lesson, *key): value for key, value in lesson_slices.items()})
        codes[lesson] = found.codes
    out = out or workspace / "similarity"
    table = csv_files.write(
        out / "similarity.csv",
        [
            ("lesson", "student_a", "student_b", "similarity", "flagged"),
            *[(p.lesson, p.student_a, p.student_b, f"{p.similarity:.4f}", int(p.flagged)) for p in pairs],
        ],
    )
    page = out / "index.html"
    page.write_text(_page(pairs, codes, slices, threshold), encoding="utf-8")
    return Report(pairs, problems, page, table, threshold)
