"""The configuration files Jupyter and nbgrader find on their own: the repository's
nbgrader_config.py (`make lab`, Validate, `nbgrader` commands), the one the pipeline writes into
each workspace (`make formgrader`), and the learner's and instructor's JupyterLab settings.
tests/test_browser.py uses them all in a browser; these tests say what each holds."""

import ast
import inspect
import json
import os
import re
import shutil
import sys
from pathlib import Path

import nbformat
import nbgrader.apps.api
import nbgrader.apps.autogradeapp
import nbgrader.apps.generatefeedbackapp
import pytest
from jupyter_client.kernelspec import KernelSpecManager
from nbgrader.apps import NbGraderAPI
from nbgrader.converters import Autograde
from nbgrader.preprocessors import CheckCellMetadata, ClearOutput, Execute
from nbgrader.validator import Validator
from traitlets.config import Config
from traitlets.config.loader import PyFileConfigLoader

from autograder import lessons
from autograder.engine.keep_going import KEEP_GOING
from autograder.engine.nbgrader_patches import PATCHED
from autograder.engine.nbgrader_steps import CourseAutograde, CourseFeedback
from autograder.engine.validate import GRADING_STEPS

ROOT_CONFIG = lessons.ROOT / "nbgrader_config.py"
PACKAGE = lessons.ROOT / "autograder"
JUPYTER_CONFIG = lessons.ROOT / "jupyter_config"
LABEXTENSION = Path(sys.prefix) / "share" / "jupyter" / "labextensions" / "@jupyter" / "nbgrader"
INSTRUCTOR_PLUGINS = {"formgrader", "create-assignment"}
EXCHANGE_PLUGINS = {"assignment-list", "course-list"}


def _load_patching(path: Path) -> tuple[Config, dict[tuple[object, str], object]]:
    """The configuration a Jupyter application reads from ``path``, and what the file set of
    nbgrader's names (``nbgrader_patches.PATCHED``); nbgrader's are put back afterwards."""
    before = [getattr(owner, name) for owner, name in PATCHED]
    try:
        config = PyFileConfigLoader(path.name, str(path.parent)).load_config()
        return config, {(owner, name): getattr(owner, name) for owner, name in PATCHED}
    finally:
        for (owner, name), value in zip(PATCHED, before, strict=True):
            setattr(owner, name, value)


def _load(path: Path) -> tuple[Config, list]:
    """The configuration a Jupyter application reads from ``path``; nbgrader's Validator's steps as
    the file leaves them."""
    config, patched = _load_patching(path)
    return config, patched[Validator, "preprocessors"]


def test_the_repository_config_is_the_pipelines_default():
    from autograder.engine.kernels.sandbox import Limits
    from autograder.engine.submission import Setup

    config, steps = _load(ROOT_CONFIG)
    workspace = lessons.ROOT / "workspace"
    default = Setup(workspace, workspace / "release", 60, Limits(), False, "", True).config()
    default.CourseDirectory.db_url = f"sqlite:///{lessons.ROOT / 'workspace' / 'gradebook.db'}"
    assert config == default
    assert steps == GRADING_STEPS


def test_the_pipeline_writes_its_own_config_into_its_workspace(tmp_path, monkeypatch):
    from autograder.engine.pipeline import Pipeline

    pipeline = Pipeline(tmp_path, release=tmp_path / "release", sandbox=None, cell_timeout_s=17)
    written = tmp_path / "nbgrader_config.py"
    assert written.stat().st_mode & 0o777 == 0o600  # it may hold the gradebook's password
    monkeypatch.delenv("COURSE_DEVICE")  # the Formgrader's process grades on the CPU too
    config, steps = _load(written)
    assert os.environ["COURSE_DEVICE"] == "cpu"
    assert config == pipeline.setup.config()
    assert config.Execute.timeout == 17 and config.CourseDirectory.root == str(tmp_path.resolve())
    assert steps == GRADING_STEPS
    before = written.stat().st_mtime_ns
    Pipeline(tmp_path, release=tmp_path / "release", sandbox=None, cell_timeout_s=17)
    assert written.stat().st_mtime_ns == before  # unchanged, not rewritten


@pytest.mark.parametrize("where", ["repository", "workspace"])
def test_each_config_file_makes_nbgraders_tools_grade_as_the_pipeline_does(where, tmp_path):
    from autograder.engine.pipeline import Pipeline

    if where == "repository":
        path = ROOT_CONFIG
    else:
        path = Pipeline(tmp_path, release=tmp_path / "release", sandbox=None).workspace / "nbgrader_config.py"
    _, patched = _load_patching(path)
    assert patched[nbgrader.apps.api, "Autograde"] is CourseAutograde
    command = patched[nbgrader.apps.autogradeapp, "Autograde"]  # `nbgrader autograde` grades as the pipeline
    assert issubclass(command, CourseAutograde) and command.__module__ == "autograder.engine.nbgrader_patches"
    assert patched[nbgrader.apps.api, "GenerateFeedback"] is CourseFeedback
    assert patched[nbgrader.apps.generatefeedbackapp, "GenerateFeedback"] is CourseFeedback
    assert patched[NbGraderAPI, "autograde"].__module__ == "autograder.engine.nbgrader_patches"
    assert patched[Validator, "preprocessors"] == GRADING_STEPS
    # nothing but the configuration file changed them: the course's own modules leave nbgrader as it is
    assert (
        nbgrader.apps.api.Autograde is Autograde and NbGraderAPI.autograde.__module__ == "nbgrader.apps.api"
    )


# The patches' own functions, and the names they had before they were gathered in one
PATCHING = {
    "apply_course_patches",
    "use_course_steps",
    "grade_as_the_pipeline",
    "answer_formgrader",
    "validate_as_graded",
}


def _patching(source: str) -> list[str]:
    """What ``source`` does to nbgrader: each call of a patching function (by its name, with or
    without its leading underscore), and each name it sets on something imported from nbgrader."""
    tree = ast.parse(source)
    from_nbgrader = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            from_nbgrader |= {
                (alias.asname or alias.name).split(".")[0]
                for alias in node.names
                if alias.name.startswith("nbgrader")
            }
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("nbgrader"):
            from_nbgrader |= {alias.asname or alias.name for alias in node.names}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            if name.lstrip("_") in PATCHING:
                found.append(f"calls {name}")
            elif name == "setattr" and ast.unparse(node.args[0]).split(".")[0] in from_nbgrader:
                found.append(f"sets {ast.unparse(node.args[0])}")
        elif isinstance(node, ast.Assign | ast.AugAssign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                if isinstance(target, ast.Attribute) and ast.unparse(target).split(".")[0] in from_nbgrader:
                    found.append(f"sets {ast.unparse(target)}")
    return found


def test_nbgrader_is_patched_by_one_function_that_only_the_config_files_call():
    from autograder.engine.pipeline import CONFIG_FILE

    # the scan sees how the patches were applied before they were gathered in nbgrader_patches.py
    before = {
        "from nbgrader.apps import NbGraderAPI\nNbGraderAPI.autograde = autograde": [
            "sets NbGraderAPI.autograde"
        ],
        "import nbgrader.apps.api\nnbgrader.apps.api.Autograde = A": ["sets nbgrader.apps.api.Autograde"],
        "from nbgrader import validator\nsetattr(validator.Validator, 'x', 1)": ["sets validator.Validator"],
        "def course_config():\n    use_course_steps()": ["calls use_course_steps"],
        "validate_as_graded()\nanswer_formgrader(setup)": [
            "calls validate_as_graded",
            "calls answer_formgrader",
        ],
    }
    assert {source: _patching(source) for source in before} == before
    sources = {path.relative_to(lessons.ROOT).as_posix(): path.read_text() for path in PACKAGE.rglob("*.py")}
    sources["nbgrader_config.py"] = ROOT_CONFIG.read_text()
    sources["pipeline.CONFIG_FILE"] = CONFIG_FILE.format(setup="None")
    found = {where: what for where, source in sources.items() if (what := _patching(source))}
    patches = found.pop("autograder/engine/nbgrader_patches.py")
    assert found == {
        "nbgrader_config.py": ["calls apply_course_patches"],
        "pipeline.CONFIG_FILE": ["calls apply_course_patches"],
    }
    # nbgrader_patches.py sets what PATCHED names (the converters through a loop over their modules)
    assert sorted(patches) == [
        "calls _grade_as_the_pipeline",
        "calls _use_course_steps",
        "calls _validate_as_graded",
        "sets NbGraderAPI.autograde",
        "sets Validator.preprocessors",
        "sets nbgrader.apps.api.Autograde",
        "sets nbgrader.apps.autogradeapp.Autograde",
    ]


def _attention_that_warns(folder: Path) -> Path:
    """Lesson 03 as a learner hands it in: correct, but it prints a UserWarning on every call."""
    from solutions.attention import scaled_dot_product_attention

    shutil.copytree(lessons.COURSE / "03_attention", folder / "03_attention")
    path = folder / "03_attention" / lessons.notebook_name("03_attention")
    nb = nbformat.read(path, as_version=4)
    source = inspect.getsource(scaled_dot_product_attention)
    warns = "    import warnings\n    warnings.warn('scores computed')\n    ### BEGIN SOLUTION"
    (cell,) = [cell for cell in nb.cells if cell.metadata.get("nbgrader", {}).get("solution")]
    cell.source = source.replace("    ### BEGIN SOLUTION", warns)
    nbformat.write(nb, path)
    return path


def test_validate_passes_a_correct_solution_that_warns_as_grading_does(tmp_path, monkeypatch):
    path = _attention_that_warns(tmp_path)
    config, steps = _load(ROOT_CONFIG)
    nbgraders_own = [CheckCellMetadata, ClearOutput, Execute]  # stderr in a test cell fails it
    monkeypatch.setattr(Validator, "preprocessors", nbgraders_own)
    failed = Validator(config=config).validate(str(path))["failed"]
    assert len(failed) == 4 and all("UserWarning: scores computed" in cell["error"] for cell in failed)
    monkeypatch.setattr(Validator, "preprocessors", steps)
    assert Validator(config=config).validate(str(path)) == {}


def test_validate_fails_an_unimplemented_exercise(monkeypatch):
    config, steps = _load(ROOT_CONFIG)
    monkeypatch.setattr(Validator, "preprocessors", steps)
    failed = Validator(config=config).validate(str(lessons.COURSE / "01_embedding" / "embedding.ipynb"))
    assert failed["failed"] and all("not implemented yet" in cell["error"] for cell in failed["failed"])


@pytest.mark.parametrize("lesson", lessons.written_lessons())
def test_run_all_goes_on_in_the_learners_copy_only(lesson):
    course = nbformat.read(lessons.COURSE / lesson / lessons.notebook_name(lesson), as_version=4)
    source = nbformat.read(lessons.source_path(lesson), as_version=4)
    untagged = [
        cell.metadata.nbgrader.grade_id
        for cell in course.cells
        if cell.cell_type == "code" and KEEP_GOING not in cell.metadata.get("tags", [])
    ]
    # all but the install cell: when the course fails to install, Run All stops there (keep_going.py)
    assert untagged == ["code_01"], f"{lesson}: Run All would stop at a failure in {untagged}"
    tagged = [
        cell.metadata.nbgrader.grade_id
        for cell in source.cells
        if KEEP_GOING in cell.metadata.get("tags", [])
    ]
    assert tagged == [], f"{lesson}: nbval would let these source cells fail: {tagged}"


@pytest.mark.parametrize("lesson", lessons.written_lessons())
def test_a_lesson_names_its_kernel_as_the_kernel_does(lesson):
    """JupyterLab writes the kernel's display name into a notebook that says otherwise, which then
    shows as modified the moment it opens."""
    name = KernelSpecManager().get_kernel_spec("python3").display_name
    for path in (lessons.COURSE / lesson / lessons.notebook_name(lesson), lessons.source_path(lesson)):
        assert nbformat.read(path, as_version=4).metadata.kernelspec.display_name == name, path


def _plugins() -> set[str]:
    """The plugin ids of nbgrader's JupyterLab extension, as its installed bundle declares them."""
    text = "".join(path.read_text() for path in (LABEXTENSION / "static").glob("*.js"))
    return set(re.findall(r'"@jupyter/nbgrader:([a-z-]+)"', text))


def test_a_learner_sees_no_instructor_panel_and_an_instructor_sees_them():
    plugins = _plugins()
    assert {"validate-assignment", *INSTRUCTOR_PLUGINS, *EXCHANGE_PLUGINS} <= plugins, plugins
    learner = json.loads((JUPYTER_CONFIG / "learner" / "labconfig" / "page_config.json").read_text())
    off = {
        key.removeprefix("@jupyter/nbgrader:")
        for key, value in learner["disabledExtensions"].items()
        if value
    }
    assert off == plugins - {"validate-assignment"}
    instructor = json.loads((JUPYTER_CONFIG / "instructor" / "labconfig" / "page_config.json").read_text())
    off = {
        key.removeprefix("@jupyter/nbgrader:")
        for key, value in instructor["disabledExtensions"].items()
        if value
    }
    assert off == EXCHANGE_PLUGINS
    for role, formgrader in (("learner", False), ("instructor", True)):
        server = json.loads((JUPYTER_CONFIG / role / "jupyter_server_config.json").read_text())
        extensions = server["ServerApp"]["jpserver_extensions"]
        assert extensions["nbgrader.server_extensions.formgrader"] is formgrader
        assert extensions["nbgrader.server_extensions.validate_assignment"] is True
        assert not extensions["nbgrader.server_extensions.assignment_list"]
