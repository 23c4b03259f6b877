"""A graded class as data: one verdict file per submission, for the class insights and regrades.

``<workspace>/verdicts/<lesson>/<student>.json`` holds what grading found, written by the
grader's own process from ``Graded`` (never from a file or an output of the submission). Every
route that grades a submission grades it through ``grade`` below, which records the verdict as
soon as the gradebook has the score: the command line's loop, its worker processes and Dask
workers (autograder/engine/parallel.py), regrade, and the Formgrader's Autograde button
(autograder/engine/nbgrader_patches.py). A grading whose worker died has its verdict written by
the process that saw it die (``write``).

    {"lesson": "03_attention", "student": "ben", "graded_at": "2026-12-02T11:40:00+00:00",
     "score": 3.0, "max_score": 6.0, "failure": null,
     "cells": {"test_scaled_dot_product_attention_values":
                 {"exercise": "scaled_dot_product_attention", "points": 0.0, "max_points": 2.0,
                  "visible": false, "hidden": null, "mistakes": ["scores scaled by d_k"],
                  "unwritten": false}}}

``visible`` and ``hidden`` say whether the cell's visible check and its hidden tests passed
before the judge (None: the cell has no hidden tests, the hidden tests did not get to run, or
the judge did not run the cell); ``mistakes`` are the catalogued mistakes the checks named,
recorded from the catalogue entries as the judge ran them; ``unwritten`` says the cell failed
on a stub that still raises NotImplementedError (false in files written before it was recorded).
"""

import json
import os
import tempfile
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from autograder import grading
from autograder.engine import submission
from autograder.engine.submission import Graded, Setup

FOLDER = "verdicts"


@dataclass(frozen=True)
class CellVerdict:
    """One test cell of one submission."""

    exercise: str
    points: float
    max_points: float
    visible: bool | None = None
    hidden: bool | None = None
    mistakes: list[str] = field(default_factory=list)
    unwritten: bool = False


@dataclass(frozen=True)
class Verdict:
    """One submission: its score, why grading failed (if it did), and its test cells by grade id."""

    lesson: str
    student: str
    graded_at: str
    score: float
    max_score: float
    failure: str | None
    cells: dict[str, CellVerdict]


def path(workspace: Path, lesson: str, student: str) -> Path:
    return workspace / FOLDER / lesson / f"{student}.json"


def of(graded: Graded) -> Verdict:
    """The verdict file's content for a submission just graded."""
    cells = {}
    for grade_id, (points, most) in graded.scores.items():
        seen = graded.seen.get(grade_id, {})
        cells[grade_id] = CellVerdict(
            grading.exercise_of(graded.lesson, grade_id),
            points,
            most,
            seen.get("visible"),
            seen.get("hidden"),
            list(seen.get("mistakes", [])),
            bool(seen.get("unwritten", False)),
        )
    score, most = graded.score
    graded_at = datetime.now(UTC).isoformat(timespec="seconds")
    return Verdict(graded.lesson, graded.student, graded_at, score, most, graded.failure, cells)


def write(workspace: Path, graded: Graded) -> Path:
    """Record ``graded`` (replacing the submission's earlier verdict, whole at every moment)."""
    target = path(workspace, graded.lesson, graded.student)
    target.parent.mkdir(parents=True, exist_ok=True)
    # a name no other writer holds, on this host or another that shares the workspace (Dask)
    handle, partial = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent)
    with os.fdopen(handle, "w", encoding="utf-8") as file:
        file.write(json.dumps(asdict(of(graded)), indent=1, ensure_ascii=False) + "\n")
    os.replace(partial, target)
    return target


def grade(setup: Setup, lesson: str, student: str) -> Graded:
    """Grade one submission in this process, as ``setup`` says (``submission.grade``), and record
    its verdict in ``setup.workspace``: the one way a route grades."""
    graded = submission.grade(setup, lesson, student)
    write(setup.workspace, graded)
    return graded


def read(file: Path) -> Verdict:
    data = json.loads(file.read_text())
    cells = {grade_id: CellVerdict(**cell) for grade_id, cell in data.pop("cells").items()}
    return Verdict(**data, cells=cells)


def read_all(workspace: Path) -> list[Verdict]:
    """Every recorded verdict, by lesson then student."""
    return [read(file) for file in sorted((workspace / FOLDER).glob("*/*.json"))]
