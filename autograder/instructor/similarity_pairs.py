"""What the similarity report says of its pairs: the lines a pair shares that the template does not
have (the reason for a flag, in the learners' own code), and the clusters flagged pairs make, so
that a learner alike to five others is one group to look at, not five rows.
"""

import difflib
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
from copydetect.utils import filter_code
from pygments import lexers, token

PYTHON = lexers.get_lexer_by_name("python")


@dataclass(frozen=True)
class Pair:
    """Two learners' code for one lesson; ``similarity`` is the larger of the two shares of each
    learner's fingerprinted code that the other's matches (0 to 1). ``shared`` holds, for the pairs
    the page shows, the lines of each that the other's code matches and the template does not have
    (learner a's line, learner b's line), in a's order."""

    lesson: str
    student_a: str
    student_b: str
    similarity: float
    flagged: bool
    shared: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class Cluster:
    """Learners of one lesson joined by flagged pairs (a connected component), and those pairs,
    most similar first."""

    lesson: str
    students: tuple[str, ...]
    pairs: tuple[Pair, ...]

    @property
    def highest(self) -> float:
        return self.pairs[0].similarity


def _components(flagged: list[Pair]) -> list[list[Pair]]:
    """The flagged pairs of one lesson grouped by connected component, in the order they come."""
    leader: dict[str, str] = {}

    def root(student: str) -> str:
        while leader.setdefault(student, student) != student:
            student = leader[student]
        return student

    for pair in flagged:
        leader[root(pair.student_a)] = root(pair.student_b)
    groups: dict[str, list[Pair]] = {}
    for pair in flagged:
        groups.setdefault(root(pair.student_a), []).append(pair)
    return list(groups.values())


def clusters(pairs: list[Pair]) -> list[Cluster]:
    """The connected components of the flagged pairs, lesson by lesson (in the order the lessons
    come in ``pairs``), each lesson's most similar first."""
    found: list[Cluster] = []
    for lesson in dict.fromkeys(pair.lesson for pair in pairs):
        flagged = sorted((p for p in pairs if p.lesson == lesson and p.flagged), key=lambda p: -p.similarity)
        lesson_clusters = [
            Cluster(
                lesson, tuple(sorted({s for p in group for s in (p.student_a, p.student_b)})), tuple(group)
            )
            for group in _components(flagged)
        ]
        found += sorted(lesson_clusters, key=lambda cluster: (-cluster.highest, cluster.students))
    return found


@lru_cache(maxsize=65536)
def bare(line: str) -> str:
    """A line without its comment and its whitespace: how a learner's line is compared with the
    template's (a stub's ``def forward(self, x):`` is the template's however it is indented)."""
    return "".join(
        text
        for kind, text in PYTHON.get_tokens(line)
        if kind not in token.Comment and kind not in token.Text and kind not in token.Whitespace
    )


@lru_cache(maxsize=65536)
def _shape(line: str) -> str:
    """A line as the fingerprints read it (names as one letter): a renamed copy has its original's."""
    return filter_code(line, "line.py", "python")[0]


def _matched_lines(code: str, slices: np.ndarray, template: set[str]) -> list[str]:
    """The lines of ``code`` that matched code (``slices``: starts in row 0, ends in row 1) reaches,
    but for blank and comment-only lines and the template's own lines."""
    spans = list(zip(*slices.astype(int).tolist(), strict=True)) if slices.size else []
    lines, start = [], 0
    for line in code.splitlines(keepends=True):
        end = start + len(line)
        key = bare(line)
        if key and key not in template and any(s < end and e > start for s, e in spans):
            lines.append(line.rstrip())
        start = end
    return lines


def shared_lines(
    code_a: str, slices_a: np.ndarray, code_b: str, slices_b: np.ndarray, template: set[str]
) -> tuple[tuple[str, str], ...]:
    """The lines two learners share, side by side: of the lines the other's code matches in each
    (none of the template's, whose lines ``template`` holds as ``bare`` gives them), those that
    line up in the same order with the same shape, names aside."""
    lines_a = _matched_lines(code_a, slices_a, template)
    lines_b = _matched_lines(code_b, slices_b, template)
    matcher = difflib.SequenceMatcher(
        None, [_shape(line) for line in lines_a], [_shape(line) for line in lines_b], autojunk=False
    )
    return tuple(
        (lines_a[a + offset], lines_b[b + offset])
        for a, b, size in matcher.get_matching_blocks()
        for offset in range(size)
    )
