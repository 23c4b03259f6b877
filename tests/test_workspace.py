"""The workspace is one model (autograder/engine/workspace.py): its folders and files are named
there only, the student-id rule is written once, and every path to the gradebook waits for a
locked SQLite file."""

import ast
from pathlib import Path

from autograder.engine import workspace as layout
from autograder.engine.nbgrader_config import course_config
from autograder.engine.pipeline import Pipeline

PACKAGE = Path(__file__).resolve().parent.parent / "autograder"
NAMES = {
    layout.SUBMITTED,
    layout.RELEASE,
    layout.UNZIPPED,
    layout.REPLACED,
    layout.FEEDBACK,
    layout.EXCHANGE,
    layout.GRADEBOOK,
    layout.COURSE_FILE,
    layout.EXTENSIONS_FILE,
    layout.PROBLEMS_FILE,
}


def _joins(source: str) -> list[str]:
    """The workspace names ``source`` joins onto a path by hand (``root / "submitted"``)."""
    return [
        node.right.value
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.BinOp)
        and isinstance(node.op, ast.Div)
        and isinstance(node.right, ast.Constant)
        and node.right.value in NAMES
    ]


def _assigned(source: str, name: str) -> bool:
    """Whether ``source`` binds ``name`` at its top level (a definition, not an import)."""
    return any(
        isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets)
        for node in ast.parse(source).body
    )


def _modules() -> dict[str, str]:
    return {
        str(path.relative_to(PACKAGE)): path.read_text()
        for path in PACKAGE.rglob("*.py")
        if "sample_submissions" not in path.parts and path.name != "workspace.py"
    }


def test_the_workspaces_folders_and_files_are_named_in_one_module():
    found = {name: joined for name, source in _modules().items() if (joined := _joins(source))}
    assert found == {}


def test_the_scan_finds_a_name_joined_by_hand():
    """The ways the layout was written before it had a module of its own."""
    assert _joins('folder = setup.workspace / "submitted" / student / lesson') == ["submitted"]
    assert _joins('path = workspace / "problems.csv"') == ["problems.csv"]
    assert _joins('"submitted" + "/"') == []


def test_the_student_id_rule_is_defined_once():
    assert [name for name, source in _modules().items() if _assigned(source, "STUDENT_ID")] == []
    assert _assigned(PACKAGE.joinpath("engine", "workspace.py").read_text(), "STUDENT_ID")
    assert layout.STUDENT_ID.fullmatch("ada.cetin-2") and not layout.STUDENT_ID.fullmatch("../ada")


def test_every_path_to_the_workspaces_gradebook_waits_for_a_locked_sqlite(tmp_path):
    """The pipeline's own, nbgrader's configuration (the Formgrader, `nbgrader` commands): the
    same URL, with the minute's timeout; the configuration gave none before (SQLite's 5 s)."""
    workspace = tmp_path.resolve()
    url = layout.sqlite_url(workspace)
    assert url.endswith(f"gradebook.db?timeout={layout.SQLITE_TIMEOUT_S}")
    assert course_config(workspace, sandbox=None).CourseDirectory.db_url == url
    assert Pipeline(workspace, sandbox=None, log=lambda *_: None).setup.db_url == url
    other = "postgresql+psycopg://grader@db/course"
    assert course_config(workspace, sandbox=None, db_url=other).CourseDirectory.db_url == other


def test_a_key_is_student_then_lesson():
    key = layout.Key("ada", "03_attention")
    assert (key.student, key.lesson) == key == ("ada", "03_attention")
    assert {("ada", "03_attention"): 1}[key] == 1  # a plain (student, lesson) tuple finds it
