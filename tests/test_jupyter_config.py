"""The configuration files Jupyter and nbgrader find on their own: the repository's
nbgrader_config.py (`make lab`, Validate, `nbgrader` commands), the one the pipeline writes into
each workspace (`make formgrader`), and the learner's and instructor's JupyterLab settings.
tests/test_browser.py uses them all in a browser; these tests say what each holds."""

import inspect
import json
import os
import re
import shutil
import sys
from pathlib import Path

import nbformat
import pytest
from jupyter_client.kernelspec import KernelSpecManager
from nbgrader.preprocessors import CheckCellMetadata, ClearOutput, Execute
from nbgrader.validator import Validator
from traitlets.config.loader import PyFileConfigLoader

from autograder import lessons
from autograder.engine.keep_going import KEEP_GOING
from autograder.engine.validate import GRADING_STEPS

ROOT_CONFIG = lessons.ROOT / "nbgrader_config.py"
JUPYTER_CONFIG = lessons.ROOT / "jupyter_config"
LABEXTENSION = Path(sys.prefix) / "share" / "jupyter" / "labextensions" / "@jupyter" / "nbgrader"
INSTRUCTOR_PLUGINS = {"formgrader", "create-assignment"}
EXCHANGE_PLUGINS = {"assignment-list", "course-list"}


def _load(path: Path):
    """The configuration a Jupyter application reads from ``path``; nbgrader's Validator as the
    file leaves it (its steps are restored afterwards)."""
    steps = Validator.preprocessors
    try:
        config = PyFileConfigLoader(path.name, str(path.parent)).load_config()
        return config, Validator.preprocessors
    finally:
        Validator.preprocessors = steps


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
