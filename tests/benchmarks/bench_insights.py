"""Benchmark: the class insights of a class of 200 learners on all 11 lessons.

Run with `.venv/bin/python tests/benchmarks/bench_insights.py [--students 200]`. A script, not a
test: it prints how long `insights` takes and exits 0.

The class is synthetic: one verdict file per learner and lesson, its test cells the lesson's real
ones (``grading.table``), each passed, failed with a catalogued mistake of its exercise (the real
names, from the catalogue), failed without one, or passed visibly and failed hidden, drawn from a
seeded random source; one grading in fifty failed. No notebook is graded: only the insights'
own work (reading the verdicts, counting, drawing the figures, writing the page and the CSV) is
timed.
"""

import argparse
import json
import random
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root

from autograder import grading, lessons  # noqa: E402
from autograder.checks.core import catalogue_data  # noqa: E402
from autograder.engine import verdicts  # noqa: E402
from autograder.engine.verdicts import CellVerdict, Verdict  # noqa: E402
from autograder.instructor.insights import insights  # noqa: E402


def _cell(test: grading.GradedTest, names: list[str], draw: random.Random) -> CellVerdict:
    """One learner's test cell: mostly passed, else one of the ways a cell fails."""
    roll = draw.random()
    if roll < 0.6:
        return CellVerdict(test.exercise, test.points, test.points, True, True if test.hidden else None)
    if roll < 0.85 and names:
        return CellVerdict(test.exercise, 0.0, test.points, False, None, [draw.choice(names)])
    if roll < 0.9 and test.hidden:
        return CellVerdict(test.exercise, 0.0, test.points, True, False)
    return CellVerdict(test.exercise, 0.0, test.points, False, None)


def write_class(workspace: Path, students: int, seed: int = 0) -> int:
    """Verdict files for ``students`` learners on every written lesson; returns how many."""
    draw = random.Random(seed)
    names = {exercise: [entry["name"] for entry in entries] for exercise, entries in catalogue_data().items()}
    written = 0
    for lesson in lessons.written_lessons():
        table = grading.table(lesson)
        most = sum(test.points for test in table)
        for number in range(students):
            student = f"learner{number:03d}"
            if draw.random() < 0.02:
                verdict = Verdict(
                    lesson, student, "2026-12-01T10:00:00+00:00", 0.0, most, "not valid JSON", {}
                )
            else:
                cells = {test.grade_id: _cell(test, names.get(test.exercise, []), draw) for test in table}
                score = sum(cell.points for cell in cells.values())
                verdict = Verdict(lesson, student, "2026-12-01T10:00:00+00:00", score, most, None, cells)
            target = verdicts.path(workspace, lesson, student)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(json.dumps(asdict(verdict)))
            written += 1
    return written


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--students", type=int, default=200)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-insights-") as scratch:
        workspace = Path(scratch)
        files = write_class(workspace, args.students)
        start = time.perf_counter()
        page = insights(workspace)
        elapsed = time.perf_counter() - start
        table = page.with_name("insights.csv")
        print(
            f"insights of {args.students} learners x {len(lessons.written_lessons())} lessons "
            f"({files} verdict files): {elapsed:.2f} s\n"
            f"page {page.stat().st_size / 1024:.0f} KiB, CSV {table.stat().st_size / 1024:.0f} KiB "
            f"({len(table.read_text().splitlines()) - 1} rows)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
