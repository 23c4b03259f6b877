"""Hostile submissions, graded in one run between two honest students, with the sandbox on
(tests/hostile_class.py, graded once for this file, test_hostile_kernel.py and
test_hostile_leftovers.py): the points and the reports.

For every attack: the honest students' grades are what they would be without it, the
submissions and the repository are unchanged, each attacker gets the points its answer
earned and no more (a forged check is overruled by the judge), and the instructor is told
what each did.
"""

import ast
from pathlib import Path

from autograder import lessons
from tests.conftest import HOSTILE_CLASS_FILES, worker_unit
from tests.hostile_class import (
    ATTACKS,
    EARNED,
    EDITED,
    HONEST,
    LESSON,
    REPORTED,
    SHORTCUTS,
    TAMPERING,
    digest,
    outputs,
)


def _reads_the_class(path: Path) -> bool:
    functions = (node for node in ast.walk(ast.parse(path.read_text())) if isinstance(node, ast.FunctionDef))
    return any(argument.arg == "graded_hostile_class" for node in functions for argument in node.args.args)


def test_the_files_that_read_the_class_go_to_one_worker():
    """A file that reads the class and is not in HOSTILE_CLASS_FILES would grade it a second time
    on a worker of its own under make test."""
    readers = {
        f"tests/{path.name}" for path in Path(__file__).parent.glob("test_*.py") if _reads_the_class(path)
    }
    assert readers == HOSTILE_CLASS_FILES
    assert {worker_unit(file) for file in readers} == {"tests/test_hostile.py"}
    assert worker_unit("tests/test_layering.py") == "tests/test_layering.py"


def test_honest_students_keep_every_point(graded_hostile_class):
    scores = graded_hostile_class["pipeline"].scores()
    assert [scores[(student, LESSON)] for student in HONEST] == [(3.0, 3.0), (3.0, 3.0)]


def test_the_submissions_and_the_repository_are_unchanged(graded_hostile_class):
    pipeline = graded_hostile_class["pipeline"]
    assert digest(pipeline.submitted.rglob("*")) == graded_hostile_class["submitted"]
    assert digest(lessons.ROOT.glob("autograder/**/*.py")) == graded_hostile_class["repository"]
    graded_folders = {p.name for p in (pipeline.workspace / "autograded").iterdir()}
    assert graded_folders == set(HONEST) | set(EARNED)
    # nothing was written beside the workspace (the zip's ../../ name included)
    assert sorted(p.name for p in graded_hostile_class["tmp"].iterdir()) == [
        "download.zip",
        "inbox",
        "release",
        "workspace",
    ]


def test_the_catalogue_has_25_cases_or_more():
    assert len(ATTACKS) + len(SHORTCUTS) + len(EDITED) + 4 >= 25  # 4: the intake zip's cases


def test_each_attacker_gets_the_points_it_earned_and_no_more(graded_hostile_class):
    scores = graded_hostile_class["pipeline"].scores()
    assert {student: scores[(student, LESSON)] for student in EARNED} == {
        student: (points, 3.0) for student, points in EARNED.items()
    }


def test_each_case_is_reported_to_the_instructor_as_expected(graded_hostile_class):
    reported: dict[str, list[str]] = {}
    for problem in graded_hostile_class["pipeline"].problems:
        reported.setdefault(problem.student, []).append(problem.what)
    assert sorted(reported) == sorted(REPORTED)
    for student, expected in REPORTED.items():
        lines = reported[student]
        assert len(lines) == len(expected), (student, lines)
        for start, line in zip(expected, lines, strict=True):
            assert line.startswith(start), (student, line)


def test_the_judge_overrules_a_forged_check(graded_hostile_class):
    """The forger replaced the values checks inside its kernel; the judge, which runs them where
    the kernel cannot reach, fails its wrong answer: the shapes point only, and a report."""
    pipeline = graded_hostile_class["pipeline"]
    assert pipeline.scores()[("forger", LESSON)] == (1.0, 3.0)
    what = next(p.what for p in pipeline.problems if p.student == "forger" and p.what.startswith(TAMPERING))
    assert "sqrt(d_model)" in what, what  # the judge's own message names the mistake
    assert "JudgeFailure" in outputs(pipeline, "forger")  # and the feedback says why the points went
