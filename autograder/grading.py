"""Each lesson's grading table, read from its source notebook: the test cells are its one source.
(Installed from the learner's wheel, from the released notebook: visible checks only.)

A lesson's test cells (solutions/lesson_scripts/NN_*.py, built into solutions/lessons/) say
everything about grading: which exercise each cell tests (its grade_id is
``test_<exercise>_...``), how many points it gives, the visible check it runs, and the hidden
tests between ``### BEGIN HIDDEN TESTS`` and ``### END HIDDEN TESTS``. nbgrader grades those
cells; the judge (autograder/engine/judge.py) runs them again; the mutation tests run their visible and
hidden parts on every catalogued mistake. So no second list of checks can drift from them.
"""

import ast
import builtins
import functools
import re
from dataclasses import dataclass
from typing import Any

import nbformat

from autograder import lessons

COURSE_METADATA = "course"  # a cell's own metadata for the course: {"experiment": true}
HIDDEN_BLOCK = re.compile(r"### BEGIN HIDDEN TESTS\n(.*?)### END HIDDEN TESTS\n?", re.S)


@dataclass(frozen=True)
class GradedTest:
    """One test cell: its lesson, grade_id, exercise and points; its visible code (the cell
    without its hidden block) and its hidden code ('' when it has none)."""

    lesson: str
    grade_id: str
    exercise: str
    points: float
    visible: str
    hidden: str


def lesson_of(resources: dict | None) -> str | None:
    """The lesson that nbgrader is grading (from its resources), or None for a notebook that is
    no lesson of the course or whose source notebook is missing."""
    lesson = (resources or {}).get("nbgrader", {}).get("assignment")
    return lesson if lesson in lessons.EXERCISES and lessons.source_path(lesson).exists() else None


@functools.cache
def source_notebook(lesson: str) -> nbformat.NotebookNode:
    """The lesson's source notebook (the instructor's copy, never a submission), read once. The
    learner's wheel holds no source notebooks: there it is the released notebook that the
    package installed (read-only, never a learner's copy), whose test cells are the same
    without their hidden blocks, so that ``table`` gives the same visible code, hidden ''."""
    source = lessons.source_path(lesson)
    return nbformat.read(source if source.exists() else lessons.course_path(lesson), as_version=4)


def is_test_cell(cell: nbformat.NotebookNode) -> bool:
    """A graded code cell that is not a solution: a test cell."""
    meta = cell.metadata.get("nbgrader", {})
    return cell.cell_type == "code" and bool(meta.get("grade")) and not meta.get("solution")


def exercise_of(lesson: str, grade_id: str) -> str:
    """'test_split_heads_blocks' -> 'split_heads': the longest exercise the grade_id starts with."""
    matches = [e for e in lessons.EXERCISES[lesson] if grade_id.startswith(f"test_{e}")]
    if not matches:
        raise ValueError(f"{lesson}: test cell {grade_id} names no exercise of {lessons.EXERCISES[lesson]}")
    return max(matches, key=len)


@functools.cache
def table(lesson: str) -> tuple[GradedTest, ...]:
    """The lesson's test cells, in notebook order."""
    rows = []
    for cell in filter(is_test_cell, source_notebook(lesson).cells):
        meta = cell.metadata.nbgrader
        hidden = "".join(HIDDEN_BLOCK.findall(cell.source)).strip()
        visible = HIDDEN_BLOCK.sub("", cell.source).strip()
        exercise = exercise_of(lesson, meta["grade_id"])
        rows.append(GradedTest(lesson, meta["grade_id"], exercise, float(meta["points"]), visible, hidden))
    return tuple(rows)


@functools.cache
def experiments(lesson: str) -> frozenset[str]:
    """The grade_ids of the lesson's experiment cells: locked code cells, marked in the source
    notebook (never in a submission), that neither define nor test anything graded, so that
    grading may skip them (tests/test_skipping.py proves it)."""
    return frozenset(
        cell.metadata.nbgrader["grade_id"]
        for cell in source_notebook(lesson).cells
        if cell.metadata.get(COURSE_METADATA, {}).get("experiment") and cell.metadata.nbgrader.get("locked")
    )


def import_statements(lesson: str) -> list[ast.stmt]:
    """The import statements of the lesson's locked cells in its source notebook (the
    instructor's copy, never a submission), in order."""
    return [
        node
        for cell in source_notebook(lesson).cells
        if cell.cell_type == "code" and cell.metadata.get("nbgrader", {}).get("locked")
        for node in ast.parse(cell.source).body
        if isinstance(node, ast.Import | ast.ImportFrom)
    ]


def _bound(lesson: str, statements: list[ast.stmt]) -> dict:
    namespace: dict = {"__builtins__": builtins}
    for node in statements:
        exec(compile(ast.Module([node], []), lesson, "exec"), namespace)  # noqa: S102 - our own source
    return namespace


@functools.cache
def grading_imports(lesson: str) -> dict:
    """The names a lesson's test cells use from the grading code (``checks``), bound here: the
    lesson's imports from modules of the ``autograder`` package."""
    ours = [n for n in import_statements(lesson) if isinstance(n, ast.ImportFrom) and n.module
            and n.module.split(".")[0] == "autograder"]  # fmt: skip
    return _bound(lesson, ours)


@functools.cache
def lesson_imports(lesson: str) -> dict:
    """Every name the lesson's locked cells import (``torch``, the reference ``Transformer`` a
    test cell hands to a check, ``checks``), bound here as in the learner's notebook."""
    return _bound(lesson, import_statements(lesson))


def run(test: GradedTest, code: str, implementation: Any) -> None:
    """Run part of a test cell (its ``visible`` or ``hidden`` code) with the exercise's name
    bound to ``implementation``, as nbgrader runs the cell in a learner's notebook."""
    namespace = {**lesson_imports(test.lesson), test.exercise: implementation}
    exec(compile(code, f"<{test.grade_id}>", "exec"), namespace)  # noqa: S102 - our own source
