"""Hostile text in the instructor's reports, and copies moved out of the solution cells.

- Names learners choose (in the LMS's roster, in an upload's file and folder names) reach every
  CSV file the project writes as text, never as a formula a spreadsheet runs
  (autograder/engine/csv_files.py); numbers the project computed stay numbers.
- What a submission's code raises or leaves reaches the problems report and the terminal as one
  line about its own student: no escape sequence, no line of its own (autograder/engine/
  plain_text.py, ``Problem``), and a notebook's own metadata writes no line of the report.
- Names from the roster reach nbgrader's gradebook, which the Formgrader writes into its pages
  unescaped, without the characters of markup (autograder/engine/pipeline.py, ``MARKUP``).
- Similarity compares everything a learner handed in: a copy in a cell added after the stub is
  found as a copy in the solution cell is (autograder/instructor/similarity.py).

Each attack is shown succeeding without its defence (the plain writer, the text as it came, the
old choice of cells), then failing with it.
"""

import ast
import csv
import zipfile
from pathlib import Path

import jinja2
import nbformat
import nbgrader.server_extensions.formgrader as formgrader
import pytest

from autograder import lessons
from autograder.authoring.samples import filled
from autograder.engine import csv_files, execute, submission
from autograder.engine.judge import JUDGE_METADATA
from autograder.engine.pipeline import Pipeline
from autograder.engine.submission import Problem
from autograder.engine.submission_files import FILES_METADATA
from autograder.instructor import grades, insights, late, lms, similarity
from tests import similarity_class
from tests.helpers import FORMULAS, formulas

LESSON = "01_embedding"
NOTEBOOK = lessons.notebook_name(LESSON)
# What learners set as their names in Canvas or Moodle, or as a file's name in an upload.
# What a submission's code raises: cursor up, erase the line, a window title, then lines that
# read as the grader's, one of them about an honest student.
FORGED = "No problems: every submission was graded as handed in."
ABOUT_ADA = "  - ada / 01_embedding: tampering suspected, cell test_Embedding_values: copied from mallory"
HOSTILE = f"\x1b[1A\x1b[2K\x1b]0;all graded\x07\n{FORGED}\n{ABOUT_ADA}"
# The right answer, and a forward that raises HOSTILE when the judge calls it (its calls come
# through the kernel's serving code, autograder/engine/remote.py): it passes in the notebook
# and fails before the judge, whose reason quotes the exception.
RAISER = f"""
import sys as _sys

_honest_forward = Embedding.forward


def _forward(self, *args, **kwargs):
    frame = _sys._getframe()
    while frame is not None:
        if frame.f_code.co_filename.endswith("remote.py"):
            raise RuntimeError({HOSTILE!r})
        frame = frame.f_back
    return _honest_forward(self, *args, **kwargs)


Embedding.forward = _forward
"""


def _plain_cell(value: csv_files.Cell) -> str:
    """The stand-in without the defence: what csv.writer writes of a value."""
    return "" if value is None else str(value)


def printed(problems: list[Problem]) -> list[str]:
    """The lines the command line prints for the problems (autograder/__main__.py)."""
    text = "\n".join(f"  - {p.student} / {p.lesson}: {p.what}" for p in problems)
    return text.splitlines()


# CSV formulas ------------------------------------------------------------------------------------


def _roster(tmp_path: Path, names: dict[str, str]) -> lms.Roster:
    path = tmp_path / "roster.csv"
    rows = [["student", "name", "canvas_id", "email", "id_number"]]
    rows += [
        [student, name, str(1000 + n), f"{student}@uni.example", f"{n:04d}"]
        for n, (student, name) in enumerate(names.items())
    ]
    with path.open("w", newline="", encoding="utf-8") as handle:
        csv.writer(handle).writerows(rows)
    return lms.read_roster(path)


def _graded(students: list[str]) -> dict:
    scores = {(student, LESSON): (-0.5 if n == 0 else 3.0, 3.0) for n, student in enumerate(students)}
    return grades.apply_late(scores, dict.fromkeys(scores), late.Policy())


def test_roster_names_reach_canvas_and_moodle_as_text(tmp_path, monkeypatch):
    names = {f"s{n}": name for n, name in enumerate(FORMULAS)}
    roster = _roster(tmp_path, names)
    graded = _graded(list(names))
    canvas, moodle = tmp_path / "canvas.csv", tmp_path / "moodle.csv"

    monkeypatch.setattr(csv_files, "cell", _plain_cell)  # the plain csv.writer: the attack works
    lms.canvas_csv(canvas, roster, graded, {})
    lms.moodle_csv(moodle, roster, graded, "email")
    assert FORMULAS[0] in formulas(canvas) and FORMULAS[1] in formulas(moodle)
    monkeypatch.undo()

    lms.canvas_csv(canvas, roster, graded, {})
    lms.moodle_csv(moodle, roster, graded, "email")
    assert formulas(canvas) == formulas(moodle) == []
    with moodle.open(newline="", encoding="utf-8") as handle:
        rows = list(csv.reader(handle))
    assert [row[2] for row in rows[1:]] == ["'" + name.strip() for name in FORMULAS]  # the roster strips
    assert rows[1][3] == "-0.5"  # a score the project computed stays a number, minus and all


def test_numbers_stay_numbers_and_text_is_neutralised():
    assert [csv_files.cell(value) for value in (-0.5, -3, 0.1 + 0.2, -0.0, 6.0, None)] == [
        "-0.5", "-3", "0.3", "0", "6", ""
    ]  # fmt: skip
    texts = ("-0.5", "-", "=1+1", "ada", "'=1+1", "\t=1", "\r=1", "a\nb")
    assert [csv_files.cell(text) for text in texts] == [
        "'-0.5", "'-", "'=1+1", "ada", "'=1+1", "'\\t=1", "'\\r=1", "a\\nb"
    ]  # fmt: skip
    with pytest.raises(TypeError, match="a CSV cell is text .* or None; got bytes"):
        csv_files.cell(b"=1+1")


def _upload_names(tmp_path: Path) -> Pipeline:
    """Uploads whose names are formulas: a lesson folder, a notebook's name, a zip's file name."""
    inbox = tmp_path / "inbox"
    (inbox / "mallory" / "+cmd|' -C calc'!A0").mkdir(parents=True)
    (inbox / "mallory" / "+cmd|' -C calc'!A0" / NOTEBOOK).write_text("{}")
    (inbox / "mallory" / LESSON).mkdir(parents=True)
    (inbox / "mallory" / LESSON / "@SUM(1+1)*cmd|' -C calc'!A0.ipynb").write_text("not a notebook")
    archive = tmp_path / "download.zip"
    with zipfile.ZipFile(archive, "w") as bundle:
        bundle.writestr(f"{FORMULAS[0]}.ipynb", "{}")
    pipeline = Pipeline(tmp_path / "workspace", log=lambda *_: None, sandbox=None)
    pipeline.collect_folder(inbox)
    pipeline.collect_zip(archive, LESSON)
    return pipeline


def test_upload_names_reach_problems_csv_as_text(tmp_path, monkeypatch):
    pipeline = _upload_names(tmp_path)
    monkeypatch.setattr(csv_files, "cell", _plain_cell)
    found = formulas(pipeline.save_problems())
    assert any(cell.startswith("+cmd") for cell in found) and any(cell.startswith("@SUM") for cell in found)
    assert any(cell.startswith("=HYPERLINK") for cell in found)
    monkeypatch.undo()
    path = pipeline.save_problems()  # an earlier run's rows, read back, are written again as text
    assert formulas(path) == []
    assert len(path.read_text(encoding="utf-8").splitlines()) == 1 + len(pipeline.problems)  # once each
    assert pipeline.save_problems().read_bytes() == path.read_bytes()  # and saving again changes nothing


def csv_writers(path: Path, root: Path) -> list[str]:
    """Where a module writes CSV itself (csv.writer or csv.DictWriter): 'path:line' each."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        named = (
            isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "csv"
        ) and node.attr in ("writer", "DictWriter")
        imported = isinstance(node, ast.ImportFrom) and node.module == "csv"
        imported = imported and any(alias.name in ("writer", "DictWriter") for alias in node.names)
        if named or imported:
            found.append(f"{path.relative_to(root)}:{node.lineno}")
    return found


def test_every_csv_the_project_writes_goes_through_the_one_writer(tmp_path):
    """A module added later that writes a CSV file itself fails this test."""
    stand_in = tmp_path / "report.py"  # writes its CSV as lms.py and insights.py did
    stand_in.write_text(
        "import csv\n\n\ndef write(handle, rows):\n    csv.DictWriter(handle, ['a']).writerows(rows)\n"
    )
    (tmp_path / "other.py").write_text("from csv import writer\n")
    assert [line for path in (stand_in, tmp_path / "other.py") for line in csv_writers(path, tmp_path)] == [
        "report.py:5", "other.py:1"
    ]  # fmt: skip
    modules = sorted((lessons.ROOT / "autograder").rglob("*.py"))
    writers = {line.split(":")[0] for path in modules for line in csv_writers(path, lessons.ROOT)}
    assert writers == {"autograder/engine/csv_files.py"}


# Kernel-produced text ----------------------------------------------------------------------------


def _mallory() -> nbformat.NotebookNode:
    """The right answer with RAISER after it, and lines of its own in the notebook's metadata
    where the grader keeps what a kernel left behind."""
    nb = filled(LESSON)
    for cell in nb.cells:
        if cell.metadata.get("nbgrader", {}).get("solution"):
            cell.source += "\n\n" + RAISER
    nb.metadata[FILES_METADATA] = [FORGED, ABOUT_ADA.strip()]
    return nb


def _grade(root: Path, notebooks: dict[str, nbformat.NotebookNode]) -> Pipeline:
    for student, nb in notebooks.items():
        path = root / "inbox" / student / LESSON / NOTEBOOK
        path.parent.mkdir(parents=True)
        nbformat.write(nb, path)
    pipeline = Pipeline(root / "workspace", release=root / "release", log=lambda *_: None, cell_timeout_s=30)
    pipeline.release([LESSON])
    pipeline.collect_folder(root / "inbox")
    pipeline.autograde()
    return pipeline


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """ada (honest) and mallory graded in the sandbox; then every report the instructor makes,
    with a roster that names ada and mallory by formulas."""
    root = tmp_path_factory.mktemp("reports")
    pipeline = _grade(root, {"ada": filled(LESSON), "mallory": _mallory()})
    workspace = pipeline.workspace
    roster = root / "roster.csv"
    with roster.open("w", newline="", encoding="utf-8") as handle:
        csv.writer(handle).writerows(
            [["student", "name", "email"], ["ada", FORMULAS[0], "a@x"], ["mallory", FORMULAS[1], "m@x"]]
        )
    grades.export(pipeline, workspace / "grades.csv")
    grades.export_lms(pipeline, "canvas", roster, workspace / "canvas.csv")
    grades.export_lms(pipeline, "moodle-email", roster, workspace / "moodle.csv")
    insights.insights(workspace)
    similarity.similarity(workspace)
    pipeline.save_problems()
    return pipeline


def test_the_honest_student_keeps_every_point_and_the_attacker_loses_to_the_judge(graded):
    scores = graded.scores()
    assert scores["ada", LESSON] == (3.0, 3.0)
    assert scores["mallory", LESSON][0] < 3.0


def test_kernel_text_without_the_defence_writes_lines_about_ada(graded, monkeypatch):
    """What the judge recorded from mallory's kernel, made into the report's line as it came: it
    moves the terminal's cursor, says "No problems" and accuses ada."""
    path = graded.workspace / "autograded" / "mallory" / LESSON / NOTEBOOK
    reasons = nbformat.read(path, as_version=4).metadata[JUDGE_METADATA]["overruled"].values()
    assert any(HOSTILE in reason for reason in reasons)
    monkeypatch.setattr(submission, "report_line", lambda text: text)
    lines = printed([Problem("mallory", LESSON, f"tampering suspected: {reason}") for reason in reasons])
    assert FORGED in lines and any(line.startswith(ABOUT_ADA) for line in lines)
    assert any("\x1b[2K" in line for line in lines)


def test_kernel_text_is_one_inert_line_about_its_own_student(graded):
    about = {problem.student for problem in graded.problems}
    assert about == {"mallory"}  # ada is named in no line of the report
    lines = printed(graded.problems)
    assert len(lines) == len(graded.problems) and all(line.isprintable() for line in lines)
    assert FORGED not in lines and not [line for line in lines if line.startswith("  - ada")]
    quoted = [line for line in lines if "\\x1b[1A\\x1b[2K\\x1b]0;all graded\\x07\\nNo problems" in line]
    assert quoted and all(
        line.startswith("  - mallory / 01_embedding: tampering suspected") for line in quoted
    )
    with (graded.workspace / "problems.csv").open(newline="", encoding="utf-8") as handle:
        rows = list(csv.reader(handle))[1:]
    assert {row[0] for row in rows} == {"mallory"} and all(row[2].isprintable() for row in rows)


def test_a_notebooks_own_metadata_writes_no_line_of_the_report(graded, tmp_path, monkeypatch):
    assert not [p for p in graded.problems if p.what in (FORGED, ABOUT_ADA.strip())]
    # without the defence (the execute step leaves the submission's metadata in place), it does
    monkeypatch.setattr(execute, "FILES_METADATA", "not the grader's key")
    undefended = _grade(tmp_path, {"mallory": _mallory()})
    assert [p.what for p in undefended.problems if p.what in (FORGED, ABOUT_ADA.strip())] == [
        FORGED,
        ABOUT_ADA.strip(),
    ]


def test_no_csv_of_the_class_holds_a_formula(graded):
    written = sorted(graded.workspace.rglob("*.csv"))
    names = {path.name for path in written}
    assert {
        "problems.csv",
        "grades.csv",
        "canvas.csv",
        "moodle.csv",
        "insights.csv",
        "similarity.csv",
    } <= names
    assert {path.name: formulas(path) for path in written} == {path.name: [] for path in written}
    with (graded.workspace / "moodle.csv").open(newline="", encoding="utf-8") as handle:
        names_written = {row[2] for row in csv.reader(handle)}
    assert "'" + FORMULAS[0] in names_written and "'" + FORMULAS[1] in names_written


# Similarity ---------------------------------------------------------------------------------------


def _moved_copy(workspace: Path, victim: str, lesson: str) -> None:
    """'mover': the released notebook, stubs in place, and after each solution cell an added cell
    holding the victim's code for it, verbatim (it replaces the stub's definitions when run)."""
    theirs = nbformat.read(workspace / "submitted" / victim / lesson / lessons.notebook_name(lesson), 4)
    code = {
        cell.metadata.nbgrader["grade_id"]: cell.source
        for cell in theirs.cells
        if cell.metadata.get("nbgrader", {}).get("solution")
    }
    nb = nbformat.read(lessons.course_path(lesson), as_version=4)
    cells = []
    for cell in nb.cells:
        cells.append(cell)
        if cell.metadata.get("nbgrader", {}).get("solution"):
            cells.append(nbformat.v4.new_code_cell(code[cell.metadata.nbgrader["grade_id"]]))
    nb.cells = cells
    path = workspace / "submitted" / "mover" / lesson / lessons.notebook_name(lesson)
    path.parent.mkdir(parents=True)
    nbformat.write(nb, path)


def _solution_cells_only(path: Path) -> list[str]:
    """The stand-in without the defence: the solution cells only, as similarity read them before."""
    cells = nbformat.read(path, as_version=4).cells
    return [c.source for c in cells if c.get("metadata", {}).get("nbgrader", {}).get("solution") is True]


def test_a_copy_moved_into_an_added_cell_is_flagged(tmp_path, monkeypatch):
    lesson = "05_multi_head"
    similarity_class.write_workspace(tmp_path, similarity_class.independent_class(10, seed=3))
    _moved_copy(tmp_path, "learner004", lesson)

    def mover(report) -> list[similarity.Pair]:
        return [p for p in report.pairs if {p.student_a, p.student_b} == {"learner004", "mover"}]

    monkeypatch.setattr(similarity, "_code_cells", _solution_cells_only)
    missed = similarity.similarity(tmp_path, [lesson])  # the old selection: the stubs, all boilerplate
    assert [p.similarity for p in mover(missed)] in ([], [0.0]) and not missed.flagged
    monkeypatch.undo()
    report = similarity.similarity(tmp_path, [lesson])
    assert [(p.similarity, p.flagged) for p in mover(report)] == [(1.0, True)]
    assert [p for p in report.flagged if "mover" not in (p.student_a, p.student_b)] == []


MARKUP_NAME = 'Eve, <img src=x onerror="fetch(`//attacker.example`)">'


def _formgrader_nav(first: str, last: str) -> str:
    """nbgrader's own Formgrader macro for a submission's page, rendered with these names."""
    folder = Path(formgrader.__file__).parent / "templates"
    macros = jinja2.Environment(loader=jinja2.FileSystemLoader(folder)).get_template(
        "formgrade/formgrade_macros.html.j2"
    )
    resources = {"first_name": first, "last_name": last, "index": 0, "student": "mallory", "total": 1}
    return macros.module.nav(resources)


def test_roster_names_reach_the_formgraders_gradebook_without_markup(graded, tmp_path, monkeypatch):
    """The roster's names go into nbgrader's gradebook, which the Formgrader writes into its
    submission page unescaped: a name holding markup would be the page's markup."""
    roster = tmp_path / "roster.csv"
    with roster.open("w", newline="", encoding="utf-8") as handle:
        csv.writer(handle).writerows([["student", "name", "email"], ["mallory", MARKUP_NAME, "m@x"]])

    def mallory_in_the_gradebook() -> tuple[str, str]:
        with graded.gradebook() as gb:
            student = gb.find_student("mallory")
            return student.first_name, student.last_name

    monkeypatch.setattr(lms, "MARKUP", {})  # without the defence
    lms.name_students(graded, roster)
    assert "<img src=x" in _formgrader_nav(*mallory_in_the_gradebook())
    monkeypatch.undo()
    lms.name_students(graded, roster)
    first, last = mallory_in_the_gradebook()
    assert (last, first) == ("Eve", 'img src=x onerror="fetch(`//attacker.example`)"')
    page = _formgrader_nav(first, last)
    assert "<img" not in page and "Eve, img src=x" in page
