"""The class insights of one lesson, as data: what autograder/instructor/insights.py counts from
the verdict files, and autograder/instructor/insights_page.py shows."""

from dataclasses import dataclass, field


@dataclass(frozen=True)
class CellRate:
    """One test cell across the class: the learners who got all its points, of those graded on it."""

    grade_id: str
    exercise: str
    passed: int
    graded: int

    @property
    def rate(self) -> float:
        return self.passed / self.graded if self.graded else 0.0


@dataclass
class LessonInsights:
    """One lesson across the class.

    ``mistakes``: exercise -> mistake name -> the learners whose checks named it, sorted;
    ``visible_only``: exercise -> learner -> the test cells whose visible checks they passed and
    whose hidden tests they failed; ``scores``: learner -> (points, the lesson's points);
    ``failed``: learner -> why their grading failed (they are in no other count)."""

    lesson: str
    cells: list[CellRate] = field(default_factory=list)
    mistakes: dict[str, dict[str, list[str]]] = field(default_factory=dict)
    visible_only: dict[str, dict[str, list[str]]] = field(default_factory=dict)
    scores: dict[str, tuple[float, float]] = field(default_factory=dict)
    failed: dict[str, str] = field(default_factory=dict)

    @property
    def graded(self) -> int:
        """Learners whose notebook was graded (failed gradings apart)."""
        return len(self.scores)

    @property
    def max_score(self) -> float:
        return max((most for _, most in self.scores.values()), default=0.0)

    def mistake_counts(self) -> list[tuple[str, str, int]]:
        """(exercise, mistake, learners), the most frequent first, then by exercise and name."""
        counts = [
            (exercise, mistake, len(students))
            for exercise, named in self.mistakes.items()
            for mistake, students in named.items()
        ]
        return sorted(counts, key=lambda row: (-row[2], row[0], row[1]))
