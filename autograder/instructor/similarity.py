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
table of every pair compared (with its cluster and how many lines it shares), and an offline page
(similarity_page) that groups the flagged learners of a lesson into clusters (a learner alike to
five others is one group, not five rows), and shows each pair with the reason for its score: the
lines the two share that the released notebook and the reference do not have (similarity_pairs),
then both learners' code side by side with the matched code marked. Each lesson is flagged from
a threshold chosen on measured generated classes, and the page says how often that threshold
flagged learners who worked alone there (similarity_threshold). Learners' code is hostile text:
every piece of it is HTML-escaped, and the page's Content-Security-Policy forbids scripts. A flag
asks a person to look; it is never a verdict.
"""

import io
import itertools
import re
from dataclasses import dataclass, field, replace
from pathlib import Path

import nbformat
import numpy as np
from copydetect import CodeFingerprint, compare_files
from copydetect.utils import filter_code, get_token_coverage

from autograder.engine import csv_files
from autograder.engine.intake import MAX_NOTEBOOK_BYTES
from autograder.engine.plain_text import one_line
from autograder.engine.workspace import RELEASE, STUDENT_ID, SUBMITTED
from autograder.instructor import similarity_page, similarity_threshold
from autograder.instructor.similarity_pairs import Cluster, Pair, bare, clusters, shared_lines
from autograder.lessons import LESSON_NAMES, SOURCE

# The shortest run of (tokenised) code that counts as a match, in characters: copydetect's default.
NOISE_CHARS = 25
# Between two cells of a learner's code, in the table and on the page.
SEPARATOR = "\n\n"
# The page shows every flagged pair of a lesson, and at least this many of its most similar.
SHOWN_PER_LESSON = 10


@dataclass
class Report:
    """Every pair compared (each lesson's most similar first), the clusters of flagged learners,
    what could not be read, the files written, and each lesson's threshold and the sentence on
    how often it flags learners who worked alone."""

    pairs: list[Pair]
    clusters: list[Cluster]
    problems: list[str]
    page: Path
    table: Path
    thresholds: dict[str, float]
    rates: dict[str, str]

    @property
    def flagged(self) -> list[Pair]:
        return [pair for pair in self.pairs if pair.flagged]

    def summary(self) -> str:
        """A few lines for the terminal: what was compared, the clusters flagged, where to look."""
        flagged, groups = len(self.flagged), len(self.clusters)
        lines = [f"{len(self.pairs)} pairs compared; {flagged} flagged, in {groups} cluster(s):"]
        for cluster in self.clusters:  # student ids: letters, digits, . _ -
            pairs = len(cluster.pairs)
            lines.append(
                f"  {cluster.lesson}: {', '.join(cluster.students)} "
                f"({pairs} pair{'s' * (pairs > 1)}, up to {cluster.highest:.0%})"
            )
        unmeasured = [lesson for lesson in self.rates if lesson not in similarity_threshold.MEASURED]
        lines += [f"  {lesson}: {rate}" for lesson, rate in self.rates.items() if lesson not in unmeasured]
        if unmeasured:  # one line for them all: the page gives each its sentence
            shares = "/".join(sorted({f"{self.thresholds[lesson]:.2f}" for lesson in unmeasured}))
            lines.append(
                f"  {', '.join(unmeasured)}: flagged from {shares}; not measured, so how often that flags "
                "learners who worked alone is not known"
            )
        lines += [f"  not compared: {one_line(problem)}" for problem in self.problems]  # names from uploads
        lines.append(f"side by side: {self.page}\nevery pair: {self.table}")
        return "\n".join(lines)


@dataclass
class _Lesson:
    """One lesson's learners' code (student -> their code cells), its boilerplate fingerprints and
    its template's lines (as ``bare`` gives them)."""

    name: str
    codes: dict[str, list[str]] = field(default_factory=dict)
    boilerplate: set[int] = field(default_factory=set)
    template_lines: set[str] = field(default_factory=set)


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


def fingerprint(cells: list[str], boilerplate: set[int]) -> CodeFingerprint:
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
    released = sorted((workspace / RELEASE / lesson).glob("*.ipynb"))
    template: set[str] = set()  # the cells as released or as the reference has them
    for notebook in released:
        reference = SOURCE / lesson / notebook.name
        references = _code_cells(reference) if reference.is_file() else []
        template |= {*_code_cells(notebook), *map(_as_handed_in, references)}
    found.template_lines = {bare(line) for code in template for line in code.splitlines()}
    for code in sorted(template):
        found.boilerplate |= CodeFingerprint(
            "boilerplate.py", NOISE_CHARS, 1, fp=io.StringIO(code), language="python"
        ).hashes
    names = {notebook.name for notebook in released}
    for folder in sorted((workspace / SUBMITTED).glob(f"*/{lesson}")):
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
    prints = {student: fingerprint(code, found.boilerplate) for student, code in found.codes.items()}
    pairs, slices = [], {}
    for a, b in itertools.combinations(sorted(prints), 2):
        _, shares, matched = compare_files(prints[a], prints[b])
        share = float(max(shares))
        pairs.append(Pair(found.name, a, b, round(share, 4), share >= threshold))
        if share > 0:
            slices[a, b] = matched
    return pairs, slices


def _shown(ranked: list[Pair]) -> list[Pair]:
    """The pairs of a lesson the page shows: every flagged one, and the most similar others."""
    return [p for i, p in enumerate(ranked) if (p.flagged or i < SHOWN_PER_LESSON) and p.similarity > 0]


def similarity(
    workspace: Path, lessons: list[str] | None = None, threshold: float | None = None, out: Path | None = None
) -> Report:
    """Compare the learners' solutions of each lesson pairwise (every released lesson, or those
    asked), and write ``similarity.csv`` and ``index.html`` into ``out`` (default:
    ``<workspace>/similarity/``). A pair is flagged from ``threshold``, or where none is given
    from its lesson's measured threshold (similarity_threshold). Reads the workspace only;
    changes no grade."""
    if threshold is not None and not 0 < threshold <= 1:
        raise ValueError(f"the threshold is a share of the code, above 0 and at most 1; got {threshold}")
    released = [name for name in LESSON_NAMES if (workspace / RELEASE / name).is_dir()]
    for name in lessons or []:
        if name not in released:
            raise ValueError(
                f"{name!r} is not a released lesson of {workspace}: "
                f"expected one of {', '.join(released) or 'none (nothing in release/)'}"
            )
    problems: list[str] = []
    pairs: list[Pair] = []
    grouped: list[Cluster] = []
    views: list[similarity_page.LessonView] = []
    thresholds, rates = {}, {}
    # (lesson, student a, student b) -> the cluster a flagged pair is in, the lines a shown pair shares
    cluster_of: dict[tuple[str, str, str], str] = {}
    lines_shared: dict[tuple[str, str, str], int] = {}
    for lesson in lessons or released:
        found = _read_lesson(workspace, lesson, problems)
        thresholds[lesson] = similarity_threshold.threshold(lesson, threshold)
        lesson_pairs, slices = _compare(found, thresholds[lesson])
        ranked = sorted(lesson_pairs, key=lambda pair: -pair.similarity)
        codes = {student: SEPARATOR.join(cells) for student, cells in found.codes.items()}
        shown = [
            replace(
                pair,
                shared=shared_lines(
                    codes[pair.student_a],
                    slices[pair.student_a, pair.student_b][0],
                    codes[pair.student_b],
                    slices[pair.student_a, pair.student_b][1],
                    found.template_lines,
                ),
            )
            for pair in _shown(ranked)
        ]
        with_lines = {(pair.student_a, pair.student_b): pair for pair in shown}
        ranked = [with_lines.get((pair.student_a, pair.student_b), pair) for pair in ranked]
        rates[lesson] = similarity_threshold.false_flags(lesson, thresholds[lesson], len(ranked))
        lesson_clusters = clusters(ranked)
        views.append(
            similarity_page.LessonView(
                lesson, rates[lesson], len(ranked), lesson_clusters, shown, codes, slices
            )
        )
        pairs += ranked
        grouped += lesson_clusters
        lines_shared.update({(lesson, p.student_a, p.student_b): len(p.shared) for p in shown})
        cluster_of.update(
            {
                (lesson, pair.student_a, pair.student_b): f"{lesson}:{number}"
                for number, cluster in enumerate(lesson_clusters, 1)
                for pair in cluster.pairs
            }
        )
    out = out or workspace / "similarity"
    table = csv_files.write(
        out / "similarity.csv",
        [
            ("lesson", "student_a", "student_b", "similarity", "flagged", "cluster", "lines_shared"),
            *[
                (
                    p.lesson,
                    p.student_a,
                    p.student_b,
                    f"{p.similarity:.4f}",
                    int(p.flagged),
                    cluster_of.get((p.lesson, p.student_a, p.student_b), ""),
                    lines_shared.get((p.lesson, p.student_a, p.student_b), ""),  # shown pairs only
                )
                for p in pairs
            ],
        ],
    )
    page = out / "index.html"
    page.write_text(similarity_page.page(views), encoding="utf-8")
    return Report(pairs, grouped, problems, page, table, thresholds, rates)
