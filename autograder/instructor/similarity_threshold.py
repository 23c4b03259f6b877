"""From what share of matched code a pair of learners is flagged, lesson by lesson, and how often
that flags learners who worked alone: both measured on generated classes (tests/similarity_class.py).

How the figures were measured (``python -m tests.similarity_class 200 20 1 2 3 4``, at c75a0ea):
four classes of MEASURED_CLASS learners who worked alone (each exercise one of the ways known to
be right, in a style of their own), drawn with seeds 1 to 4, each with 20 planted copies
(another learner's cells with new names, statements swapped, comments changed); every pair of a
lesson compared. A pair of a copier with anyone but their source is neither independent nor a
copy, and is in neither count: 79,600 independent pairs and 80 copies per lesson.

Lesson 05 (multi-head attention: short exercises, few ways to write them) cannot be separated by
any share. Learners who worked alone reached 0.99 (1 pair), 0.96 (2), 0.95 (8) and 0.90 (42, about
10 a class: the issue's 18 false flags at 0.90 to 0.965 in a class of 200), while a copy of a
learner who wrote little of their own scored as low as 0.80 once statements were swapped; the
copies reached 0.96 in 44 of 80 pairs, 0.90 in 69. Its threshold, 0.96, is the lowest share at
which false flags are rare (2 of 79,600, about one in two classes of 200) and still flags more than
half the copies. Lesson 10 (training: long, varied code) separates: the highest independent pair
was 0.9053 (3 pairs at 0.90 or above, none at 0.92), and 76 of 80 copies reached 0.92 (the lowest
0.8667), so its threshold is 0.92.
"""

from dataclasses import dataclass

# Learners who worked alone in each generated class the figures come from.
MEASURED_CLASS = 200
# Shares at which the measured counts were taken.
GRID = (0.85, 0.9, 0.92, 0.94, 0.95, 0.96, 0.97, 0.98, 0.99)
# The threshold of a lesson that was not measured (the generated class covers lessons 05 and 10).
THRESHOLD = 0.9


@dataclass(frozen=True)
class Measurement:
    """A lesson's threshold, and the generated classes' pairs at or above each share of GRID."""

    threshold: float
    independent_at: dict[float, int]
    copies_at: dict[float, int]
    # every measured lesson so far comes from the same four classes (see the module's docstring)
    draws: int = 4
    independent_pairs: int = 79_600
    copies: int = 80

    def at(self, threshold: float) -> tuple[float, int, int] | None:
        """The share of GRID the figures for ``threshold`` come from (the highest at or below it:
        so the counts are at most these), the independent pairs and the copies at or above it;
        None below the grid."""
        below = [share for share in GRID if share <= threshold]
        if not below:
            return None
        share = below[-1]
        return share, self.independent_at[share], self.copies_at[share]


MEASURED: dict[str, Measurement] = {
    "05_multi_head": Measurement(
        threshold=0.96,
        independent_at={0.85: 254, 0.9: 42, 0.92: 17, 0.94: 9, 0.95: 8, 0.96: 2, 0.97: 2, 0.98: 2, 0.99: 1},
        copies_at={0.85: 78, 0.9: 69, 0.92: 65, 0.94: 55, 0.95: 48, 0.96: 44, 0.97: 38, 0.98: 33, 0.99: 24},
    ),
    "10_training": Measurement(
        threshold=0.92,
        independent_at={0.85: 7, 0.9: 3, 0.92: 0, 0.94: 0, 0.95: 0, 0.96: 0, 0.97: 0, 0.98: 0, 0.99: 0},
        copies_at={0.85: 80, 0.9: 77, 0.92: 76, 0.94: 70, 0.95: 65, 0.96: 57, 0.97: 44, 0.98: 24, 0.99: 11},
    ),
}


def threshold(lesson: str, chosen: float | None = None) -> float:
    """The share from which a pair of ``lesson`` is flagged: ``chosen`` where one is given, else
    the lesson's measured threshold, else THRESHOLD."""
    if chosen is not None:
        return chosen
    measured = MEASURED.get(lesson)
    return measured.threshold if measured else THRESHOLD


def false_flags(lesson: str, share: float, pairs: int) -> str:
    """A sentence for the page and the terminal: how often ``share`` flagged independent learners
    in the lesson's generated classes, and how many false flags that makes in ``pairs`` pairs."""
    measured = MEASURED.get(lesson)
    if measured is None:
        return (
            f"Flagged from {share:.2f}. This lesson was not measured (the generated class holds lessons "
            f"{' and '.join(name[:2] for name in MEASURED) or 'none'}), so how often that flags learners "
            "who worked alone is not known."
        )
    found = measured.at(share)
    if found is None:
        return f"Flagged from {share:.2f}, below the shares measured for this lesson (from {GRID[0]})."
    grid_share, independent, copies = found
    rate = independent / measured.independent_pairs
    reached = "reached it" if grid_share == share else f"reached {grid_share:.2f} (at most as many reach it)"
    return (
        f"Flagged from {share:.2f}. In {measured.draws} generated classes of {MEASURED_CLASS} learners "
        f"(tests/similarity_class.py), {independent:,} of {measured.independent_pairs:,} pairs of learners "
        f"who worked alone {reached}: a false-positive rate of {rate:.4%}, about {rate * pairs:.1f} false "
        f"flags among this lesson's {pairs:,} pairs; {copies} of {measured.copies} planted copies did."
    )
