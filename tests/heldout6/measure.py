"""Held-out measurement of the checks (issue 33), sixth round: tests/heldout/measure.py on this folder.

Each file under ``cases/`` is one learner's solution cell for one exercise. Its first lines say
which exercise it answers and what is wrong with it::

    # exercise: scaled_dot_product_attention
    # mistake: softmax over the queries (dim=-2) instead of the keys

or ``# honest: <the idiom>`` for a correct answer written differently from the reference.
The file runs in the namespace the lesson's notebook has (its imports, and the reference's
other exercises of the same lesson standing in for the learner's earlier cells), and then
every visible test cell of the exercise runs on it, as in the notebook; the hidden parts run
too, to see whether an honest answer loses a point there.

Whether a message names the mistake is a person's judgement, recorded in ``judged.toml``
beside the first line of the message it was made on; a case whose message has changed since,
or that was never judged, is counted as not judged and listed.

    .venv/bin/python -m tests.heldout2.measure           # every case but lesson 12's
    .venv/bin/python -m tests.heldout2.measure --cpp     # lesson 12's C++ cases too (20-50 s each)
    .venv/bin/python -m tests.heldout2.measure NAME ...  # only the cases whose file stem is given
"""

import argparse
import contextlib
import io
import json
import re
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

import torch

import solutions
from autograder import grading, lessons

HERE = Path(__file__).parent
CASES = HERE / "cases"
JUDGED = HERE / "judged.toml"
HEADER = re.compile(r"^# (exercise|mistake|honest): (.+)$", re.M)


@dataclass(frozen=True)
class Case:
    """One case file: its stem, exercise, lesson, whether it is honest, and what it does."""

    name: str
    exercise: str
    lesson: str
    honest: bool
    what: str
    source: str


@dataclass(frozen=True)
class Outcome:
    """What the visible cells said (None: every one passed) and what the hidden parts said."""

    visible: str | None
    hidden: str | None


def read_case(path: Path) -> Case:
    """The case in ``path``; a file without an exercise line and a mistake or honest line is a
    ValueError that says which lines are expected."""
    source = path.read_text()
    fields = dict(HEADER.findall(source))
    if "exercise" not in fields or ("mistake" in fields) == ("honest" in fields):
        raise ValueError(
            f"{path}: expected '# exercise: NAME' and one of '# mistake: ...' or '# honest: ...'"
        )
    exercise = fields["exercise"].strip()
    lesson = next((name for name, exercises in lessons.EXERCISES.items() if exercise in exercises), None)
    if lesson is None:
        raise ValueError(f"{path}: {exercise!r} is no exercise of the course")
    honest = "honest" in fields
    return Case(
        path.stem, exercise, lesson, honest, fields["honest" if honest else "mistake"].strip(), source
    )


def implementation(case: Case) -> object:
    """The case's definition, executed as its notebook cell would be."""
    namespace = dict(grading.lesson_imports(case.lesson))
    for other in lessons.EXERCISES[case.lesson]:
        if other != case.exercise and hasattr(solutions, other):
            namespace[other] = getattr(solutions, other)
    exec(compile(case.source, f"<{case.name}>", "exec"), namespace)  # noqa: S102 - our own cases
    return namespace[case.exercise]


def first_line(error: BaseException) -> str:
    """A check's failure as its first line; anything else the learner's code raised with its type."""
    kind = type(error).__name__
    text = (str(error).strip() or kind).splitlines()[0]
    return text if kind == "CheckFailure" else f"{kind}: {text}"


def outcome(case: Case) -> Outcome:
    """Run the exercise's test cells on the case: the first failing visible cell's message, and
    the first failing hidden part's."""
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            answer = implementation(case)
    except Exception as error:  # noqa: BLE001 - a cell that does not even define its answer
        return Outcome(f"(the cell itself) {first_line(error)}", None)
    visible = hidden = None
    for test in grading.table(case.lesson):
        if test.exercise != case.exercise:
            continue
        for part, code in (("visible", test.visible), ("hidden", test.hidden)):
            if not code or (visible if part == "visible" else hidden) is not None:
                continue
            try:
                with contextlib.redirect_stdout(io.StringIO()):  # the checks' ✓ lines
                    grading.run(test, code, answer)
            except Exception as error:  # noqa: BLE001 - CheckFailure, or what the learner's code raised
                message = f"[{test.grade_id}] {first_line(error)}"
                visible, hidden = (message, hidden) if part == "visible" else (visible, message)
    return Outcome(visible, hidden)


def judgements() -> dict[str, dict]:
    return tomllib.loads(JUDGED.read_text()) if JUDGED.exists() else {}


def same_words(a: str, b: str) -> bool:
    """Whether two messages differ at most in their numbers (sizes and values drawn at random)."""
    digits = re.compile(r"-?\d+(\.\d+)?(e-?\d+)?")
    return digits.sub("#", a) == digits.sub("#", b)


def results_table(rows: list[dict], judged: dict[str, dict]) -> str:
    """RESULTS.md's table: one row per case with its message and the judgement made on it."""
    lines = ["| case | exercise | what the learner did | verdict | named? | first line of the message |",
             "|---|---|---|---|---|---|"]  # fmt: skip
    for row in rows:
        entry = judged.get(row["case"], {})
        if row["honest"]:
            named = "honest"
        elif row["visible"] is None:
            named = "passed"
        elif "named" in entry and same_words(entry.get("message", ""), row["visible"]):
            named = ("yes" if entry["named"] else "**no**") + (
                f" ({entry['note']})" if entry.get("note") else ""
            )
        else:
            named = "not judged"
        verdict = "pass" if row["visible"] is None else "fail"
        if row["hidden"]:
            verdict += " (hidden: fail)"
        message = (row["visible"] or "").replace("|", "\\|")
        lines.append(
            f"| {row['case']} | {row['exercise']} | {row['what']} | {verdict} | {named} | {message} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help="case file stems to run (default: all)")
    parser.add_argument("--cpp", action="store_true", help="include lesson 12's C++ cases")
    parser.add_argument("--json", type=Path, help="also write every case's outcome to this file")
    parser.add_argument("--table", type=Path, help="also write the per-case table (Markdown) to this file")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)  # other jobs share the machine
    cases = [read_case(path) for path in sorted(CASES.glob("*.py"))]
    cases = [c for c in cases if not args.names or c.name in args.names]
    cases = [c for c in cases if args.cpp or c.lesson != "12_libtorch"]
    judged = judgements()
    rows, unjudged, missed, lost = [], [], [], []
    counts = {"honest": [0, 0], "failed": [0, 0], "named": [0, 0]}
    for case in cases:
        result = outcome(case)
        verdict = "pass" if result.visible is None else "fail"
        print(f"{case.name:<44} {verdict}  {result.visible or ''}", flush=True)
        if result.hidden:
            print(f"{'':<44} hidden: {result.hidden}", flush=True)
        rows.append({"case": case.name, "exercise": case.exercise, "honest": case.honest, "what": case.what,
                     "visible": result.visible, "hidden": result.hidden})  # fmt: skip
        if case.honest:
            counts["honest"][1] += 1
            counts["honest"][0] += result.visible is None and result.hidden is None
            if result.visible or result.hidden:
                lost.append(case.name)
            continue
        counts["failed"][1] += 1
        counts["named"][1] += 1
        counts["failed"][0] += result.visible is not None
        entry = judged.get(case.name)
        if result.visible is None:
            missed.append(case.name)
        elif entry is None or not same_words(entry.get("message", ""), result.visible):
            unjudged.append(case.name)
        elif entry["named"]:
            counts["named"][0] += 1
    print()
    print(f"honest cases passed (visible and hidden): {counts['honest'][0]}/{counts['honest'][1]}")
    print(f"wrong cases failed (visible cells):       {counts['failed'][0]}/{counts['failed'][1]}")
    print(f"wrong cases whose message names it:       {counts['named'][0]}/{counts['named'][1]}")
    for label, names in (("honest cases that lost a point", lost), ("wrong cases that passed", missed),
                         ("not judged (no judgement, or the message changed)", unjudged)):  # fmt: skip
        if names:
            print(f"{label}: {', '.join(names)}")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    if args.table:
        args.table.write_text(results_table(rows, judged))
    return 0


if __name__ == "__main__":
    sys.exit(main())
