"""What grading records per test cell: the judge's view (visible check, hidden tests) and the
catalogued mistakes named, taken from the catalogue entries as the judge ran the checks."""

import ast
import shutil
from pathlib import Path

import nbformat
import pytest
from nbgrader.apps import NbGraderAPI, autogradeapp
from nbgrader.coursedir import CourseDirectory

from autograder.checks import attention
from autograder.checks.core import naming_noted
from autograder.engine import judge, nbgrader_patches, parallel, submission, verdicts
from autograder.engine.pipeline import Pipeline

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "autograder" / "sample_submissions"
LESSON = "03_attention"
NOTEBOOK = "attention.ipynb"
FORGED = {
    "overruled": {},
    "seen": {
        "test_scaled_dot_product_attention_values": {"visible": True, "hidden": True, "mistakes": ["forged"]}
    },
}


def test_a_named_mistake_is_noted_from_its_catalogue_entry():
    wrong = attention.MISTAKES[0]
    with naming_noted() as noted:
        text = wrong.message("scaled_dot_product_attention")
    assert noted == [wrong.name] and wrong.name in text
    wrong.message("scaled_dot_product_attention")  # outside the block: noted nowhere, and no error
    assert noted == [wrong.name]


@pytest.fixture(scope="module")
def graded(tmp_path_factory) -> Pipeline:
    root = tmp_path_factory.mktemp("verdicts")
    for student in ("ada", "ben", "cho"):
        shutil.copytree(SAMPLES / student / LESSON, root / "inbox" / student / LESSON)
    pipeline = Pipeline(root / "workspace", log=lambda line: None)
    pipeline.release([LESSON])
    pipeline.collect_folder(root / "inbox")
    pipeline.autograde()
    return pipeline


def test_each_submission_has_a_verdict_with_the_judges_view_of_each_cell(graded):
    found = {v.student: v for v in verdicts.read_all(graded.workspace)}
    assert sorted(found) == ["ada", "ben", "cho"]
    ada, ben, cho = found["ada"], found["ben"], found["cho"]
    assert ada.score == ada.max_score and all(c.visible and not c.mistakes for c in ada.cells.values())
    assert {c.hidden for c in ada.cells.values()} == {True, None}  # with hidden tests, and without
    # ben left out the 1/sqrt(d_k) (autograder/authoring/samples.py): every failing cell names it
    failing = [cell for cell in ben.cells.values() if cell.points < cell.max_points]
    assert failing and all(cell.mistakes == ["no scaling"] and cell.visible is False for cell in failing)
    assert "no scaling" in {m.name for m in attention.MISTAKES}
    # cho handed in the stubs: every cell fails, no mistake is named, the hidden tests never ran
    assert all(not c.visible and c.hidden is None and not c.mistakes for c in cho.cells.values())
    # the verdict's points are the gradebook's
    for verdict in (ada, ben, cho):
        assert graded.scores()[(verdict.student, LESSON)] == (verdict.score, verdict.max_score)


def _forged_submission(graded: Pipeline, student: str) -> None:
    folder = graded.submitted / student / LESSON
    shutil.copytree(SAMPLES / "cho" / LESSON, folder)
    nb = nbformat.read(folder / NOTEBOOK, as_version=4)
    nb.metadata[judge.JUDGE_METADATA] = FORGED
    nbformat.write(nb, folder / NOTEBOOK)


def test_a_record_forged_in_the_notebook_never_reaches_the_verdict(graded, monkeypatch):
    # a grading run with no judge, so that nothing overwrites the record (the worst case)
    monkeypatch.setattr(judge, "for_notebook", lambda executor, resources: None)
    _forged_submission(graded, "mal")
    # without the defence (execute.py drops the submission's record before grading), it gets through
    with monkeypatch.context() as undefended:
        undefended.setattr(judge, "JUDGE_METADATA", "not_the_record")
        assert graded.grade(LESSON, "mal").seen == FORGED["seen"]
    assert graded.grade(LESSON, "mal").seen == {}


# Every route that grades records the verdict: each grades through verdicts.grade, here with a
# stand-in for the grading itself (the graded fixture above grades for real).
CELL = "test_scaled_dot_product_attention_values"


def _setup(workspace: Path) -> submission.Setup:
    return submission.Setup(workspace, workspace / "release", 60, None, False, "sqlite://", False)


def _stale(workspace: Path, student: str) -> None:
    """A verdict from an earlier grading that stopped: what the insights and regrade read."""
    verdicts.write(workspace, submission.Graded(LESSON, student, {}, [], failure="an earlier run"))


@pytest.fixture
def stand_in(monkeypatch) -> list[tuple[str, str]]:
    """submission.grade replaced by one that gives 1 of 2 points at once; the (lesson, student)
    pairs it graded."""
    asked = []

    def grade(setup: submission.Setup, lesson: str, student: str) -> submission.Graded:
        asked.append((lesson, student))
        return submission.Graded(lesson, student, {CELL: (1.0, 2.0)}, [])

    monkeypatch.setattr(submission, "grade", grade)
    return asked


def _fresh(workspace: Path, student: str) -> bool:
    verdict = verdicts.read(verdicts.path(workspace, LESSON, student))
    return verdict.failure is None and verdict.cells[CELL].points == 1.0


def test_the_worker_task_records_the_verdict(tmp_path, stand_in):
    _stale(tmp_path, "ada")
    graded = parallel.grade_task(_setup(tmp_path), LESSON, "ada")
    assert stand_in == [(LESSON, "ada")] and graded.score == (1.0, 2.0)
    assert _fresh(tmp_path, "ada")


def test_the_pipelines_grade_records_the_verdict(tmp_path, stand_in):
    pipeline = Pipeline(tmp_path / "workspace", sandbox=None, log=lambda line: None)
    _stale(pipeline.workspace, "ada")
    pipeline.grade(LESSON, "ada")
    assert stand_in == [(LESSON, "ada")] and _fresh(pipeline.workspace, "ada")


def test_the_formgraders_autograde_button_records_the_verdict(tmp_path, stand_in, monkeypatch):
    for owner, name in nbgrader_patches.PATCHED:  # put back after the test, as nbgrader had them
        monkeypatch.setattr(owner, name, getattr(owner, name))
    setup = _setup(tmp_path)
    (tmp_path / "exchange").mkdir()  # the Formgrader's, as the pipeline makes it
    _stale(tmp_path, "ada")
    nbgrader_patches.apply_course_patches(setup)
    result = NbGraderAPI(config=setup.config()).autograde(LESSON, "ada")
    assert result == {"success": True, "log": ""} and stand_in == [(LESSON, "ada")]
    assert _fresh(tmp_path, "ada")


def test_nbgraders_autograde_command_records_the_verdict(tmp_path, stand_in, monkeypatch):
    for owner, name in nbgrader_patches.PATCHED:
        monkeypatch.setattr(owner, name, getattr(owner, name))
    setup = _setup(tmp_path)
    for student in ("ada", "ben"):
        (tmp_path / "submitted" / student / LESSON).mkdir(parents=True)
        (tmp_path / "submitted" / student / LESSON / NOTEBOOK).write_text("{}")
    _stale(tmp_path, "ada")
    nbgrader_patches.apply_course_patches(setup)
    # as `nbgrader autograde 03_attention` builds its converter in the workspace (AutogradeApp.start)
    coursedir = CourseDirectory(config=setup.config(), assignment_id=LESSON)
    autogradeapp.Autograde(coursedir=coursedir, config=setup.config()).start()
    assert stand_in == [(LESSON, "ada"), (LESSON, "ben")]
    assert _fresh(tmp_path, "ada") and _fresh(tmp_path, "ben")


GRADING = "autograder.engine.submission"


def _grading_calls(source: str) -> int:
    """How many calls of submission.grade ``source`` holds, whichever way it imported it."""
    tree = ast.parse(source)
    modules, functions = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == "autograder.engine":
            modules |= {alias.asname or alias.name for alias in node.names if alias.name == "submission"}
        elif isinstance(node, ast.ImportFrom) and node.module == GRADING:
            functions |= {alias.asname or alias.name for alias in node.names if alias.name == "grade"}
        elif isinstance(node, ast.Import):
            modules |= {alias.asname or alias.name for alias in node.names if alias.name == GRADING}
    calls = 0
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            called = node.func
            if isinstance(called, ast.Name) and called.id in functions:
                calls += 1
            elif isinstance(called, ast.Attribute) and called.attr == "grade":
                calls += ast.unparse(called.value) in modules
    return calls


def test_only_verdicts_grade_calls_the_grading_itself():
    """A route that called submission.grade would grade without recording the verdict."""
    # the scan sees each way of calling it (the pipeline and the Formgrader's button called it so)
    routes = [
        "from autograder.engine import submission\nsubmission.grade(setup, lesson, student)",
        "from autograder.engine.submission import grade as g\ng(setup, lesson, student)",
        "import autograder.engine.submission\nautograder.engine.submission.grade(setup, 'l', 's')",
    ]
    assert [_grading_calls(route) for route in routes] == [1, 1, 1]
    callers = {
        path.relative_to(ROOT).as_posix()
        for path in (ROOT / "autograder").rglob("*.py")
        if _grading_calls(path.read_text())
    }
    assert callers == {"autograder/engine/verdicts.py"}


def test_a_verdict_is_written_beside_another_hosts_unfinished_one(tmp_path, monkeypatch):
    """Dask workers on two hosts share the workspace and may have the same process id: a verdict's
    temporary file must not be one another writer holds. The other host's unfinished file (here a
    folder by the name a pid-only scheme would pick) stays, and the verdict is written whole."""
    monkeypatch.setattr(verdicts.os, "getpid", lambda: 4242)
    target = verdicts.path(tmp_path, LESSON, "ada")
    target.parent.mkdir(parents=True)
    (target.parent / f".{target.name}.4242").mkdir()  # another host's write, under way
    verdicts.write(tmp_path, submission.Graded(LESSON, "ada", {CELL: (1.0, 2.0)}, []))
    assert _fresh(tmp_path, "ada") and (target.parent / f".{target.name}.4242").is_dir()


def test_where_a_test_cell_failed_says_if_its_visible_check_passed_without_running_it_again():
    hidden = "### BEGIN HIDDEN TESTS\n{}\n### END HIDDEN TESTS\n"
    runs: list[str] = []
    judged = object.__new__(judge.Judge)  # no kernel: its visible check must not be run again
    judged.verdict = lambda source, grade_id, *rest: runs.append(source) or "failed"
    for visible, hidden_part, passed in (("x = 1", "assert x == 2", True), ("assert 1 == 2", "x = 1", False)):
        source = f"{visible}\n{hidden.format(hidden_part)}"
        where: list[int] = []
        assert judge.run_test_cell(source, "test_x", {}, None, seed=1, where=where) is not None
        assert where == ([3] if passed else [1])  # the hidden block's line, or the visible check's
        assert judged.visible_passed(visible, "test_x", source, where) is passed
    assert runs == []
    # where the failure's line is unknown, or the cell has code after its hidden block: run it again
    source = f"x = 1\n{hidden.format('x = 2')}assert x == 1\n"
    assert judged.visible_passed("x = 1\nassert x == 1", "test_x", source, [5]) is False
    assert judged.visible_passed("x = 1", "test_x", f"x = 1\n{hidden.format('x = 2')}", []) is False
    assert runs == ["x = 1\nassert x == 1", "x = 1"]
