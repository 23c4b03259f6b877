"""The class insights of one lesson, as data: what autograder/instructor/insights.py counts from
the verdict files (and the gradebook's manual scores), and autograder/instructor/insights_page.py
shows."""

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


@dataclass(frozen=True)
class ManualScore:
    """A cell a grader scored by hand in nbgrader's Formgrader: the manual score replaces the
    autograded one (``auto``; None where the cell has none) in the learner's points."""

    student: str
    grade_id: str
    exercise: str
    score: float
    max_score: float
    auto: float | None


@dataclass
class LessonInsights:
    """One lesson across the class.

    ``mistakes``: exercise -> mistake name -> the learners whose checks named it, sorted;
    ``hints``: (exercise, mistake) -> the catalogue's hint for it, what to tell the class ("" when
    the catalogue no longer holds that mistake); ``unwritten``: test cell -> the learners whose
    cell failed on a stub that still raises NotImplementedError (not attempted);
    ``unexplained``: test cell -> the learners whose written code failed it with no catalogued
    mistake named; ``visible_only``: exercise -> learner -> the test cells whose visible checks
    they passed and whose hidden tests they failed; ``scores``: learner -> (points, the lesson's
    points); ``manual``: the cells scored by hand; ``failed``: learner -> why their grading failed
    (they are in no other count)."""

    lesson: str
    cells: list[CellRate] = field(default_factory=list)
    mistakes: dict[str, dict[str, list[str]]] = field(default_factory=dict)
    hints: dict[tuple[str, str], str] = field(default_factory=dict)
    unwritten: dict[str, list[str]] = field(default_factory=dict)
    unexplained: dict[str, list[str]] = field(default_factory=dict)
    visible_only: dict[str, dict[str, list[str]]] = field(default_factory=dict)
    scores: dict[str, tuple[float, float]] = field(default_factory=dict)
    manual: list[ManualScore] = field(default_factory=list)
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
