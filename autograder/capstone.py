"""The learner's own Transformer for the capstone (lesson 10), part by part.

Each exercise of lessons 01 to 09 is taken from the learner's saved notebook (its solution
cell) in the folder tree of the running notebook (``lessons_folder``: ``course/`` in the
repository, the folder that ``python -m autograder lessons DIR`` filled elsewhere) and run
through its lesson's visible checks, with the parts accepted before it in scope: the
learner's ``EncoderLayer`` is checked with the learner's ``MultiHeadAttention`` when that one
passed. A part that is missing, still a stub, or fails a check is replaced by the reference
definition, run in the same scope, so that the rest of
the learner's parts still build on each other.

While nbgrader grades (``NBGRADER_EXECUTION`` is set) nothing is read from other lessons:
lesson 10 is graded on its own exercises, with the reference parts.

Lesson 10's own exercises (``make_batch`` ... ``train_loop``), which the capstone's training calls,
are taken the same way from the notebook's own definitions (``training_parts``): one that fails
its visible checks is replaced by the reference, and the table says so before any training.
"""

import contextlib
import inspect
import io
import os
import re
import textwrap
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

import solutions
from autograder import grading, lessons
from autograder.checks.core import CheckFailure

EARLIER = [lesson for lesson in lessons.LESSON_NAMES if lesson < "10"]
TRAINING = "10_training"  # the capstone's own lesson: its exercises train the model


def learner_code(exercise: str) -> str:
    """The reference definition as a learner would write it: no solution markers. A C++ exercise
    (lesson 12) is its exercise cell, the ``compile_module`` call around the reference's C++."""
    definition = getattr(solutions, exercise, None)
    if definition is None:
        from solutions import libtorch

        source = getattr(libtorch, exercise).cell(exercise)
    else:
        source = inspect.getsource(definition)
    return "\n".join(
        line
        for line in source.splitlines()
        if "### BEGIN SOLUTION" not in line and "### END SOLUTION" not in line
    )


@dataclass
class Parts:
    """The definitions to train with (``Transformer``, ``greedy_decode``, ...) and, per
    exercise, whose they are: "yours", or why the reference stands in."""

    definitions: dict[str, object] = field(default_factory=dict)
    whose: dict[str, str] = field(default_factory=dict)
    looked_in: Path | None = None  # the folder searched for the learner's notebooks (None: not read)

    def __getattr__(self, name: str) -> object:
        try:
            return self.definitions[name]
        except KeyError:
            raise AttributeError(name) from None

    def table(self) -> str:
        """Whose each part is, one line a part, under the folder the notebooks were looked for in."""
        width = max(len(name) for name in self.whose)
        rows = [f"{name:>{width}}: {whose}" for name, whose in self.whose.items()]
        where = (
            []
            if self.looked_in is None
            else [f"Your notebooks of lessons 01 to 09, looked for in {self.looked_in}:"]
        )
        return "\n".join(where + rows)


def lessons_folder(here: Path | None = None) -> Path:
    """The folder holding the learner's lesson folders (``<folder>/<lesson>/<notebook>``), found
    from ``here``, the kernel's working folder (Jupyter starts a notebook's kernel in the
    notebook's folder): the parent of a lesson folder, a folder that holds lesson folders, and
    otherwise the repository's ``course/`` (or ``here`` itself when installed from the wheel).
    The source notebooks' lesson folders (solutions/lessons/) are the instructor's, not a
    learner's: run there, the capstone reads ``course/`` as before."""
    here = Path.cwd() if here is None else here
    if here.name in lessons.LESSON_NAMES and here.resolve().parent != lessons.SOURCE.resolve():
        return here.parent
    if any((here / lesson).is_dir() for lesson in EARLIER):
        return here
    return here if lessons.COURSE == lessons.INSTALLED_COURSE else lessons.COURSE


def _solution_cells(path: Path) -> dict[str, str]:
    """exercise -> the code of its solution cell in a learner's notebook ({} when unreadable)."""
    try:
        nb = nbformat.read(path, as_version=4)
    except (OSError, ValueError):
        return {}
    return {
        cell.metadata["nbgrader"]["grade_id"]: cell.source
        for cell in nb.cells
        if cell.cell_type == "code" and cell.metadata.get("nbgrader", {}).get("solution")
    }


def _passes(lesson: str, exercise: str, definition: object) -> str | None:
    """None when ``definition`` passes every visible check of ``exercise``, else the first failure."""
    for test in grading.table(lesson):
        if test.exercise != exercise:
            continue
        try:
            with contextlib.redirect_stdout(io.StringIO()), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                grading.run(test, test.visible, definition)
        except CheckFailure as failure:
            return str(failure)
        except Exception as error:  # noqa: BLE001 - a learner's code may raise anything
            return f"{type(error).__name__}: {error}"
    return None


def _gist(failure: str) -> str:
    """A check's failure in a few words: the mistake's name when it names one."""
    named = re.search(r"matches a known mistake, (.+?)\. ", failure)
    return named[1] if named else textwrap.shorten(failure, 70, placeholder=" ...")


def _define(code: str, exercise: str, scope: dict) -> object:
    exec(compile(code, f"<{exercise}>", "exec"), scope)  # noqa: S102 - the learner's own code, in their kernel
    return scope[exercise]


def own_parts(course: Path | None = None) -> Parts:
    """The learner's parts where they pass their lesson's checks, the reference's elsewhere,
    read from ``course`` (by default ``lessons_folder()``) and saying where it looked."""
    parts = Parts()
    if os.environ.get("NBGRADER_EXECUTION"):
        for lesson in EARLIER:
            for exercise in lessons.EXERCISES[lesson]:
                parts.definitions[exercise] = getattr(solutions, exercise)
                parts.whose[exercise] = "reference (grading uses the reference parts)"
        return parts
    course = lessons_folder() if course is None else course
    parts.looked_in = course.resolve()
    scope: dict = {}
    for lesson in EARLIER:
        scope.update(grading.lesson_imports(lesson))
        scope.update(parts.definitions)  # the parts accepted so far, not the reference's imports
        cells = _solution_cells(course / lesson / lessons.notebook_name(lesson))
        for exercise in lessons.EXERCISES[lesson]:
            reference = learner_code(exercise)
            code = cells.get(exercise)
            failure = "reference (no saved notebook)" if code is None else None
            if code is not None:
                try:
                    definition = _define(code, exercise, scope)
                except Exception as error:  # noqa: BLE001
                    failure = f"reference (your cell raised {type(error).__name__})"
                else:
                    problem = _passes(lesson, exercise, definition)
                    if problem and "is not implemented yet" in problem:
                        failure = "reference (not written yet)"
                    elif problem:
                        failure = f"reference (yours fails lesson {lesson[:2]}'s checks: {_gist(problem)})"
            if failure:
                definition = _define(reference, exercise, scope)
            parts.definitions[exercise] = definition
            parts.whose[exercise] = failure or "yours"
    return parts


def training_parts(scope: Mapping[str, object]) -> Parts:
    """Lesson 10's exercises as the notebook defines them (``scope``: its global names) where they
    pass their visible checks, the reference's elsewhere, saying why: the capstone never trains a
    part that failed its checks without saying so first. While nbgrader grades, the reference's."""
    parts = Parts()
    grading_now = bool(os.environ.get("NBGRADER_EXECUTION"))
    for exercise in lessons.EXERCISES[TRAINING]:
        definition = scope.get(exercise)
        if grading_now:
            whose = "reference (grading uses the reference parts)"
        elif definition is None:
            whose = "reference (not defined in this notebook)"
        else:
            problem = _passes(TRAINING, exercise, definition)
            if problem is None:
                whose = "yours"
            elif "is not implemented yet" in problem:
                whose = "reference (not written yet)"
            else:
                whose = f"reference (yours fails its checks above: {_gist(problem)})"
        parts.definitions[exercise] = definition if whose == "yours" else getattr(solutions, exercise)
        parts.whose[exercise] = whose
    return parts
