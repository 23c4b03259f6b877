"""A learner's route with the installed wheel, from an empty folder: run by tests/test_learner_wheel.py
(Linux, offline, the checkout hidden) and by .github/workflows/learner.yml (macOS, Windows, Linux).

    python learner_route.py DIR REPORT.json

It needs only the installed course package, nbclient and ipykernel, never the repository:

1. ``python -m autograder lessons DIR`` puts the lessons into the empty folder DIR;
2. lesson 03 runs there (nbclient, in its own folder) with a catalogued mistake in its solution
   cell: a test cell fails, and its message names the mistake;
3. lesson 03 runs again with the right answer: every cell runs;
4. lessons 01 and 06 get the right answer and are saved; lesson 10's capstone cell, run in
   DIR/10_training, finds those two parts "yours" and no other.

Each step checks its result and exits non-zero with what went wrong; REPORT.json holds what
each step saw (for the test's own assertions) and how long each took.
"""

import json
import subprocess
import sys
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient

from autograder.capstone import learner_code

MISTAKE = "scaled by d_k instead of sqrt(d_k)"  # autograder/checks/catalogue/attention.toml
RIGHT_SCALE, WRONG_SCALE = "/ math.sqrt(d_k)", "/ d_k"
FILLED = {"01_embedding": "Embedding", "06_layer_norm": "LayerNorm"}
CAPSTONE = """import sys
import autograder
from autograder.capstone import own_parts
own = own_parts()
print(own.table())
print("KERNEL", sys.prefix, autograder.__file__)
"""


def fail(message: str) -> None:
    sys.exit(f"learner route: {message}")


def notebook(folder: Path, lesson: str) -> Path:
    (path,) = (folder / lesson).glob("*.ipynb")
    return path


def with_solution(path: Path, exercise: str, code: str) -> nbformat.NotebookNode:
    """The notebook at ``path`` with ``code`` in the solution cell of ``exercise``."""
    nb = nbformat.read(path, as_version=4)
    cells = [c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == exercise]
    if len(cells) != 1:
        fail(f"{path} has {len(cells)} solution cells for {exercise}; expected one")
    cells[0].source = code
    return nb


def execute(nb: nbformat.NotebookNode, folder: Path) -> nbformat.NotebookNode:
    """Run every cell as Jupyter would, with the kernel in ``folder`` (the notebook's own)."""
    resources = {"metadata": {"path": str(folder)}}
    NotebookClient(nb, timeout=900, kernel_name="python3", allow_errors=True, resources=resources).execute()
    return nb


def errors(nb: nbformat.NotebookNode) -> dict[str, str]:
    """grade_id (or cell number) -> the error a cell raised, for every cell that raised one."""
    found = {}
    for number, cell in enumerate(nb.cells):
        for output in cell.get("outputs", []):
            if output.output_type == "error":
                name = cell.metadata.get("nbgrader", {}).get("grade_id", f"cell {number}")
                found[name] = f"{output.ename}: {output.evalue}"
    return found


def text(nb: nbformat.NotebookNode) -> str:
    return "".join(
        o.get("text", "") for c in nb.cells for o in c.get("outputs", []) if o.output_type == "stream"
    )


def main(folder: Path, report_path: Path) -> None:
    report: dict = {"seconds": {}}
    try:
        route(folder, report)
    finally:
        report_path.write_text(json.dumps(report, indent=1))
    for step, seconds in report["seconds"].items():
        print(f"{step}: {seconds:.1f} s")


def route(folder: Path, report: dict) -> None:
    """The route's steps, each recorded in ``report`` before it is checked."""
    if folder.exists() and any(folder.iterdir()):
        fail(f"{folder} is not empty; the route starts from an empty folder")

    start = time.perf_counter()
    put = subprocess.run(
        [sys.executable, "-m", "autograder", "lessons", str(folder)], capture_output=True, text=True
    )
    report["lessons"] = {"returncode": put.returncode, "stdout": put.stdout, "stderr": put.stderr}
    report["seconds"]["lessons"] = time.perf_counter() - start
    if put.returncode != 0:
        fail(f"`python -m autograder lessons` failed:\n{put.stdout}{put.stderr}")
    report["files"] = sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file())

    attention = notebook(folder, "03_attention")
    right = learner_code("scaled_dot_product_attention")
    if RIGHT_SCALE not in right:
        fail(f"the reference attention has no `{RIGHT_SCALE}` to turn into the mistake")
    for name, code in (("mistake", right.replace(RIGHT_SCALE, WRONG_SCALE)), ("right", right)):
        start = time.perf_counter()
        ran = execute(with_solution(attention, "scaled_dot_product_attention", code), attention.parent)
        report["seconds"][f"lesson 03, {name}"] = time.perf_counter() - start
        report[name] = errors(ran)
    if not any(MISTAKE in error for error in report["mistake"].values()):
        fail(f"no test cell of lesson 03 named the mistake {MISTAKE!r}: {report['mistake']}")
    if report["right"]:
        fail(f"with the right answer, lesson 03's cells raised {report['right']}")

    for lesson, exercise in FILLED.items():
        path = notebook(folder, lesson)
        nbformat.write(with_solution(path, exercise, learner_code(exercise)), path)
    start = time.perf_counter()
    capstone = execute(
        nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(CAPSTONE)]), folder / "10_training"
    )
    report["seconds"]["capstone table"] = time.perf_counter() - start
    report["capstone errors"] = errors(capstone)
    report["capstone"] = text(capstone)
    yours = {
        line.split(":")[0].strip() for line in report["capstone"].splitlines() if line.endswith(": yours")
    }
    if yours != set(FILLED.values()):
        expected = sorted(FILLED.values())
        fail(f"the capstone found {sorted(yours)} yours; expected {expected}:\n{report['capstone']}")


if __name__ == "__main__":
    main(Path(sys.argv[1]).resolve(), Path(sys.argv[2]))
