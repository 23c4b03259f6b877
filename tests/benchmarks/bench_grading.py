"""Benchmark: grading a class, nbgrader's way against this course's, on the same machine in one run.

Run with `make bench-grading` or `.venv/bin/python tests/benchmarks/bench_grading.py [--students 50]`.
A script, not a test: it prints, and exits 0 whether or not the goal is met (1 if the grades differ).

The class: ``--students`` learners, each handing in every lesson, copied from the bundled
samples in turn (a right solution, typical mistakes, untouched stubs), so that the grades vary.
- nbgrader's way: one notebook after another, every cell run, each kernel started cold (the
  course's configuration otherwise: the sandbox, the judge, the time limits);
- this course's: experiment cells skipped, kernels forked warm from a zygote, one worker per
  core (`python -m autograder autograde` with its defaults).
Every test cell's score must be the same both ways. A worker's time per notebook (the wall
time times the workers, over the notebooks) is split into the steps of PARTS: from the grader's
own timers (``Graded.steps``: the C++ builds, the zygote's start, the kernel's start and stop,
the time the kernel was up) and the cells' own execution times (the import cell, the test cells
with the judge, the experiment cells, the other cells; the rest of the kernel's time up is
messages between the grader and the kernel). nbgrader's own steps (its converter, preprocessors,
gradebook writes, file copies) are the rest of each grading, and worker start what lies outside
any grading (starting the workers, the pipeline's own checks, a worker idle at the end).
Lesson 12's share of the grading time is printed for both ways, and the speed-up without it.
Goal: at least 10x nbgrader's speed on a 2-core machine.
"""

import argparse
import os
import shutil
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

import nbformat

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root

from autograder import grading, lessons  # noqa: E402
from autograder.authoring.samples import SAMPLES  # noqa: E402
from autograder.engine.judge import JUDGE_METADATA  # noqa: E402
from autograder.engine.pipeline import Pipeline  # noqa: E402
from autograder.engine.submission import STEPS, Graded  # noqa: E402

GOAL = 10.0
CPP_LESSON = "12_libtorch"  # its trusted C++ builds dominate; shown apart
MODELS = ("ada", "ben", "cho")  # the samples that hand in every lesson
PARTS = (
    "worker start",
    "zygote start",
    "kernel start",
    "kernel stop",
    "nbgrader's own steps",
    "C++ builds",
    "import cell",
    "experiment cells",
    "other cells",
    "test cells and judge",
    "kernel messages",
)


def make_class(inbox: Path, students: int, names: list[str]) -> None:
    """inbox/<learner>/<lesson>/: learner i hands in sample MODELS[i % 3]'s notebooks."""
    for index in range(students):
        for lesson in names:
            shutil.copytree(
                SAMPLES / MODELS[index % len(MODELS)] / lesson, inbox / f"learner{index:03d}" / lesson
            )


def grade(
    workspace: Path, inbox: Path, names: list[str], jobs: int, fast: bool
) -> tuple[float, list[Graded]]:
    """Seconds that `autograde` takes for the whole class, and what it graded."""
    pipeline = Pipeline(
        workspace, release=workspace / "release", run_everything=not fast, warm=fast, log=lambda _: None
    )
    pipeline.release(names)
    pipeline.collect_folder(inbox)
    start = time.perf_counter()
    graded = pipeline.autograde(jobs)
    seconds = time.perf_counter() - start
    if pipeline.problems:
        print(f"  problems: {pipeline.problems[:3]}")
    return seconds, graded


def _busy(cell) -> float:
    """Seconds the kernel spent on a cell (0 for a cell that did not run)."""
    timing = cell.metadata.get("execution", {})
    if "iopub.status.busy" not in timing or "iopub.status.idle" not in timing:
        return 0.0
    start, end = (
        datetime.fromisoformat(timing[key].rstrip("Z")) for key in ("iopub.status.busy", "iopub.status.idle")
    )
    return (end - start).total_seconds()


def split(workspace: Path, graded: list[Graded], worker_seconds: float) -> dict[str, float]:
    """The mean seconds of a worker per notebook in each of PARTS, from the graded notebooks and
    ``graded``; ``worker_seconds`` is the wall time times the workers, over the notebooks."""
    sums = dict.fromkeys(PARTS, 0.0)
    notebooks = sorted((workspace / "autograded").glob("*/*/*.ipynb"))
    for path in notebooks:
        lesson = path.parent.name
        nb = nbformat.read(path, as_version=4)
        skipped = grading.experiments(lesson)
        code = [cell for cell in nb.cells if cell.cell_type == "code"]
        sums["import cell"] += _busy(code[0])
        sums["test cells and judge"] += nb.metadata.get(JUDGE_METADATA, {}).get("seconds", 0.0)
        for cell in code[1:]:
            grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
            part = (
                "test cells and judge"
                if grading.is_test_cell(cell)
                else "experiment cells"
                if grade_id in skipped
                else "other cells"
            )
            sums[part] += _busy(cell)
    cells = sum(sums.values())
    for outcome in graded:
        for step in STEPS:
            if step != "cells":
                sums[step] += outcome.steps.get(step, 0.0)
        sums["nbgrader's own steps"] += outcome.seconds - sum(outcome.steps.values())
    sums["kernel messages"] = sum(outcome.steps.get("cells", 0.0) for outcome in graded) - cells
    means = {part: total / len(graded) for part, total in sums.items()}
    means["worker start"] = worker_seconds - sum(outcome.seconds for outcome in graded) / len(graded)
    return means


def lesson_share(graded: list[Graded], lesson: str) -> float:
    """The fraction of the grading time (summed over the submissions) that went to ``lesson``."""
    return sum(g.seconds for g in graded if g.lesson == lesson) / sum(g.seconds for g in graded)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--students", type=int, default=50)
    parser.add_argument("--lessons", nargs="*", default=lessons.written_lessons())
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    args = parser.parse_args()
    names = args.lessons
    count = args.students * len(names)
    print(f"{args.students} students x {len(names)} lessons = {count} notebooks; {os.cpu_count()} cores")
    with tempfile.TemporaryDirectory(prefix="bench-grading-") as scratch:
        root = Path(scratch)
        make_class(root / "inbox", args.students, names)
        results = {}
        for label, jobs, fast in (("nbgrader", 1, False), ("course", args.jobs, True)):
            seconds, graded = grade(root / label, root / "inbox", names, jobs, fast)
            parts = split(root / label, graded, seconds * jobs / count)
            share = lesson_share(graded, CPP_LESSON) if CPP_LESSON in names else 0.0
            results[label] = (seconds, share)
            shown = ", ".join(f"{part} {value:.2f}" for part, value in parts.items())
            each = f"{seconds / count:.2f} s per notebook; a worker's {seconds * jobs / count:.2f} s of it"
            print(f"  {label:8s} ({jobs} at once): {seconds:.0f} s, {each}: {shown}")
            if CPP_LESSON in names:
                ours = [g for g in graded if g.lesson == CPP_LESSON]
                each = sum(g.seconds for g in ours) / len(ours)
                builds = sum(g.steps.get("C++ builds", 0.0) for g in ours) / len(ours)
                print(
                    f"    {CPP_LESSON}: {share:.0%} of the grading time; "
                    f"{each:.1f} s a notebook, of which C++ builds {builds:.1f} s"
                )
        same = scores(root / "nbgrader") == scores(root / "course")
    before, after = results["nbgrader"][0] / count, results["course"][0] / count
    if CPP_LESSON in names and len(names) > 1:
        without = (results["nbgrader"][0] * (1 - results["nbgrader"][1])) / (
            results["course"][0] * (1 - results["course"][1])
        )
        print(f"  without {CPP_LESSON} (its share of each way's wall time taken out): {without:.1f}x")
    verdict = "yes" if same else "NO"
    both = f"{before:.2f} s vs {after:.2f} s per notebook"
    print(f"grading: {before / after:.1f}x nbgrader ({both}, grades identical: {verdict})")
    if before / after < GOAL:
        print(f"  (goal: {GOAL:.0f}x)")
    return 0 if same else 1


def scores(workspace: Path) -> dict:
    """(student, lesson, grade_id) -> score, from the workspace's gradebook."""
    from nbgrader.api import Gradebook

    from autograder.engine.nbgrader_config import COURSE_ID

    found = {}
    with Gradebook(f"sqlite:///{workspace / 'gradebook.db'}", course_id=COURSE_ID) as gb:
        for assignment in gb.assignments:
            for submission in assignment.submissions:
                for notebook in submission.notebooks:
                    for grade_ in notebook.grades:
                        found[submission.student_id, assignment.name, grade_.name] = grade_.score
    return found


if __name__ == "__main__":
    sys.exit(main())
