"""Build the lesson notebooks from their scripts: script -> source notebook -> course/.

A lesson script (``solutions/lesson_scripts/03_attention.py``) is plain text in
"percent" format; a lesson too long for one file goes on in ``10_training.2.py`` and so on
(``lessons.script_parts``). Each cell starts with a header line:

    # %% [markdown]                      prose (each line starts with "# ")
    # %%                                 code the learner runs but may not change
    # %% install                         the same, opened by the lines that install the course
                                         where it is missing (autograder/release_info.py
                                         writes them): the lesson's first code cell
    # %% experiment                      the same, but it neither defines nor tests anything
                                         graded (figures, timings, experiments): grading
                                         skips it (tests/test_skipping.py proves it may)
    # %% experiment output-varies        an experiment whose printed output depends on the
                                         machine (a training run): nbval runs it but does
                                         not compare what it prints
    # %% definition solutions.capstone.train
                                         locked code: a definition copied from the reference
                                         package, which other code (a benchmark) runs too
    # %% exercise solutions.attention.scaled_dot_product_attention
                                         the exercise: its definition is copied from
                                         the reference package (the one source); for
                                         a C++ exercise (lesson 12, a CppSource), the
                                         cell that compiles its C++
    # %% test test_scaled_dot_product_attention_shape points=1
                                         a graded test cell (hidden tests inside
                                         ### BEGIN/END HIDDEN TESTS)

The source notebook is executed (so it carries its outputs, for nbval) and
written to ``solutions/lessons/<lesson>/``; nbgrader's generate_assignment then
writes the learner's version into ``course/<lesson>/``.

    python -m autograder.authoring.build [LESSON ...]      # all written lessons by default
"""

import argparse
import hashlib
import importlib
import inspect
import os
import re
import shutil
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import nbformat
from nbclient import NotebookClient

from autograder import grading, lessons, release_info
from autograder.engine.nbgrader_config import local_sockets
from autograder.libtorch import CppSource

HEADER = re.compile(r"^# %%(?P<rest>.*)$")
NBGRADER_SCHEMA = 3
# ipykernel's own name for its kernel: a notebook that says otherwise shows as modified the moment
# JupyterLab opens it (it writes the kernel's name into the notebook).
KERNEL_DISPLAY_NAME = "Python 3 (ipykernel)"
NBVAL_IGNORE_OUTPUT = "nbval-ignore-output"  # nbval runs the cell but does not compare its output


@dataclass
class CellSpec:
    kind: str  # "markdown", "code", "install", "experiment", "definition", "exercise" or "test"
    header: str
    lines: list[str] = field(default_factory=list)


def parse_script(text: str) -> list[CellSpec]:
    """Split a lesson script into cell specs at its "# %%" header lines."""
    cells: list[CellSpec] = []
    for line in text.splitlines():
        match = HEADER.match(line)
        if match:
            header = match["rest"].strip()
            kind = "markdown" if header == "[markdown]" else (header.split()[0] if header else "code")
            if kind not in ("markdown", "code", "install", "experiment", "definition", "exercise", "test"):
                raise ValueError(
                    f"unknown cell header {line!r}: expected [markdown], install, experiment, "
                    "definition, exercise or test"
                )
            if kind == "experiment" and set(header.split()[1:]) - {"output-varies"}:
                raise ValueError(f"expected '# %% experiment [output-varies]', got {line!r}")
            cells.append(CellSpec(kind, header))
        elif cells:
            cells[-1].lines.append(line)
        elif line.strip():
            raise ValueError(f"text before the first '# %%' header: {line!r}")
    return cells


def _strip_blank_edges(lines: list[str]) -> str:
    return "\n".join(lines).strip("\n")


def markdown_source(lines: list[str]) -> str:
    """Prose lines lose their comment prefix: '# text' -> 'text', '#' -> ''."""
    stripped = []
    for line in lines:
        if line.strip() and not line.startswith("#"):
            raise ValueError(f"markdown line without '# ': {line!r}")
        stripped.append(line[2:] if line.startswith("# ") else line[1:])
    return _strip_blank_edges(stripped)


def definition_source(dotted: str) -> tuple[str, str]:
    """'solutions.attention.scaled_dot_product_attention' -> (its name, the definition's source).

    A C++ exercise (``CppSource``) is written as the cell that compiles it: ``name = compile_module(...)``.
    """
    module_name, name = dotted.rsplit(".", 1)
    definition = getattr(importlib.import_module(module_name), name)
    if isinstance(definition, CppSource):
        return name, definition.cell(name)
    return name, inspect.getsource(definition).rstrip("\n")


def _nbgrader(grade_id: str, *, solution=False, grade=False, locked=True, points=None) -> dict:
    meta = {
        "grade": grade,
        "grade_id": grade_id,
        "locked": locked,
        "schema_version": NBGRADER_SCHEMA,
        "solution": solution,
    }
    if points is not None:
        meta["points"] = points
    return meta


def _test_header(header: str) -> tuple[str, int]:
    """'test test_x points=2' -> ('test_x', 2)"""
    parts = header.split()
    if len(parts) != 3 or not parts[1].startswith("test_") or not parts[2].startswith("points="):
        raise ValueError(f"test header must read 'test test_<name> points=<n>', got {header!r}")
    return parts[1], int(parts[2].removeprefix("points="))


def build_cells(specs: list[CellSpec]) -> list[nbformat.NotebookNode]:
    """Cell specs -> notebook cells with nbgrader metadata and stable ids."""
    cells = []
    counters = {"markdown": 0, "code": 0}
    for spec in specs:
        if spec.kind == "markdown":
            counters["markdown"] += 1
            grade_id = f"text_{counters['markdown']:02d}"
            cell = nbformat.v4.new_markdown_cell(markdown_source(spec.lines))
            cell.metadata["nbgrader"] = _nbgrader(grade_id)
        elif spec.kind in ("code", "install", "experiment"):
            counters["code"] += 1
            grade_id = f"code_{counters['code']:02d}"
            opening = release_info.install_lines() + "\n" if spec.kind == "install" else ""
            cell = nbformat.v4.new_code_cell(opening + _strip_blank_edges(spec.lines))
            cell.metadata["nbgrader"] = _nbgrader(grade_id)
            if spec.kind == "experiment":
                cell.metadata[grading.COURSE_METADATA] = {"experiment": True}
            if "output-varies" in spec.header.split()[1:]:
                cell.metadata["tags"] = [NBVAL_IGNORE_OUTPUT]
        elif spec.kind == "definition":
            counters["code"] += 1
            grade_id = f"code_{counters['code']:02d}"
            cell = nbformat.v4.new_code_cell(definition_source(spec.header.split()[1])[1])
            cell.metadata["nbgrader"] = _nbgrader(grade_id)
        elif spec.kind == "exercise":
            grade_id, source = definition_source(spec.header.split()[1])
            cell = nbformat.v4.new_code_cell(source)
            cell.metadata["nbgrader"] = _nbgrader(grade_id, solution=True, locked=False)
        else:
            grade_id, points = _test_header(spec.header)
            cell = nbformat.v4.new_code_cell(_strip_blank_edges(spec.lines))
            cell.metadata["nbgrader"] = _nbgrader(grade_id, grade=True, points=points)
        cell["id"] = grade_id.replace("_", "-")
        cells.append(cell)
    ids = [cell["id"] for cell in cells]
    duplicates = sorted({i for i in ids if ids.count(i) > 1})
    if duplicates:
        raise ValueError(f"cell ids used twice: {duplicates}")
    return cells


def build_source(lesson: str) -> nbformat.NotebookNode:
    """The lesson's source notebook, not yet executed."""
    nb = nbformat.v4.new_notebook()
    parts = lessons.script_parts(lesson)  # each part starts at a cell header of its own
    nb.cells = build_cells([spec for path in parts for spec in parse_script(path.read_text())])
    nb.metadata = {
        "kernelspec": {"display_name": KERNEL_DISPLAY_NAME, "language": "python", "name": "python3"},
        "language_info": {"name": "python"},
    }
    return nb


def execute(nb: nbformat.NotebookNode, cwd: Path) -> nbformat.NotebookNode:
    """Run every cell top to bottom, then drop the per-run timing metadata.

    Execution counts stay, numbered 1..N in order: nbval compares only cells that
    have one, and a count that is exactly the cell's place is no noise.
    """
    client = NotebookClient(
        nb,
        timeout=300,
        kernel_name="python3",
        resources={"metadata": {"path": str(cwd)}},
        config=local_sockets(),
    )
    backend = os.environ.pop("MPLBACKEND", None)  # figures go inline into the notebook, as nbval sees them
    try:
        client.execute()
    finally:
        if backend is not None:
            os.environ["MPLBACKEND"] = backend
    for cell in nb.cells:
        cell.metadata.pop("execution", None)
    return nb


def write_source(lesson: str) -> Path:
    path = lessons.source_path(lesson)
    path.parent.mkdir(parents=True, exist_ok=True)
    nb = execute(build_source(lesson), path.parent)
    nbformat.write(nb, path)
    return path


def generate_students(names: list[str], release: Path) -> list[Path]:
    """Run nbgrader's generate_assignment for each lesson into ``release/<lesson>/``.

    One scratch gradebook serves every lesson: creating one costs nbgrader seconds (it runs
    the `alembic` command), which a gradebook per lesson would pay again each time.
    """
    from nbgrader.apps import NbGraderAPI

    from autograder.engine.nbgrader_config import course_config

    with tempfile.TemporaryDirectory() as workspace:
        api = NbGraderAPI(config=course_config(Path(workspace), release=release))
        for lesson in names:
            result = api.generate_assignment(lesson, force=True, create=True)
            if not result["success"]:
                raise RuntimeError(f"nbgrader generate_assignment {lesson} failed:\n{result['log']}")
    return [release / lesson / lessons.notebook_name(lesson) for lesson in names]


# What `write_course` last wrote into course/, as `sha256sum` lists it (`sha256sum -c` checks it):
# a file there that differs from its line is someone's work, never overwritten.
GENERATED = "generated.sha256"


class CourseEdited(RuntimeError):
    """course/ holds work that is not what `write_course` last wrote; the message says which."""


def file_sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def recorded_digests(course: Path) -> dict[str, str]:
    """relative path -> the digest `write_course` recorded for it."""
    listing = course / GENERATED
    lines = listing.read_text().splitlines() if listing.is_file() else []
    return {name: digest for digest, name in (line.split("  ", 1) for line in lines)}


def write_course(names: list[str], course: Path = lessons.COURSE) -> list[Path]:
    """Generate the learners' notebooks of ``names`` into ``course``, replacing only what this
    function wrote there before and nobody changed since. A file it would replace that differs
    from what it recorded (a learner's saved work in a clone, say) stops it with CourseEdited
    before anything is written; files it never wrote (a learner's own, Jupyter's checkpoints)
    are left alone."""
    recorded = recorded_digests(course)
    with tempfile.TemporaryDirectory() as scratch:
        fresh = Path(scratch)
        generate_students(names, fresh)
        new = {str(path.relative_to(fresh)): path for lesson in names for path in (fresh / lesson).rglob("*")}
        new = {name: path for name, path in new.items() if path.is_file()}
        ours = [
            name
            for lesson in names
            for path in (course / lesson).rglob("*")
            if path.is_file() and recorded.get(name := str(path.relative_to(course))) == file_sha256(path)
        ]
        edited = sorted(name for name in new if (course / name).exists() and name not in ours)
        if edited:
            listed = ", ".join(f"course/{name}" for name in edited)
            raise CourseEdited(
                f"not regenerating: {listed} differs from what was generated there last (your own work?). "
                "Copy it elsewhere to keep it, then remove it (or `git checkout` it) and run again."
            )
        for name in ours:
            (course / name).unlink()
        for name, path in new.items():
            (course / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, course / name)
            recorded[name] = file_sha256(path)
    kept = {name: digest for name, digest in recorded.items() if (course / name).is_file()}
    (course / GENERATED).write_text("".join(f"{digest}  {name}\n" for name, digest in sorted(kept.items())))
    return [course / lesson / lessons.notebook_name(lesson) for lesson in names]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("lessons", nargs="*", help="lesson names (default: every lesson with a script)")
    names = parser.parse_args(argv).lessons or lessons.written_lessons()
    unknown = [name for name in names if name not in lessons.written_lessons()]
    if unknown:
        parser.error(f"no lesson script for {unknown}; lessons with scripts: {lessons.written_lessons()}")
    for lesson in names:
        print(f"{lesson}: source {write_source(lesson).relative_to(lessons.ROOT)}", flush=True)
    try:
        written = write_course(names)
    except CourseEdited as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    for path in written:
        print(f"course {path.relative_to(lessons.ROOT)}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
