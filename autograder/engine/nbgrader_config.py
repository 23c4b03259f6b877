"""nbgrader's configuration for this course, in one function.

Every nbgrader step of the course (generating learners' notebooks, taking in
submissions, autograding, feedback) builds its configuration here, so the
choices below hold everywhere.
"""

import os
import sys
from pathlib import Path

from jupyter_core.paths import jupyter_runtime_dir
from nbgrader.converters import Autograde, GenerateAssignment
from nbgrader.preprocessors import Execute, OverwriteCells
from traitlets.config import Config

from autograder.engine import workspace as layout
from autograder.engine.cpp_cache import shared_cache
from autograder.engine.execute import CourseExecute
from autograder.engine.feedback_page import offline_feedback
from autograder.engine.inert import InertNotebook
from autograder.engine.keep_going import KeepGoing
from autograder.engine.kernels.sandbox import Limits, SandboxedExecute
from autograder.engine.kernels.zygote import WarmExecute
from autograder.engine.overwrite import RestoringOverwriteCells
from autograder.lessons import SOURCE

# nbgrader runs the `alembic` command when it creates a gradebook, and jupyter_client starts
# kernels with `python` from PATH: both must come from this environment, also when an
# instructor runs `.venv/bin/python -m autograder` without activating it.
_BIN = str(Path(sys.executable).parent)
if _BIN not in os.environ.get("PATH", "").split(os.pathsep):
    os.environ["PATH"] = os.pathsep.join([_BIN, os.environ.get("PATH", "")])

COURSE_ID = "transformer-course"
# nbgrader defaults to 30 s per cell. The lessons' slowest cell takes a few seconds on a
# 2-core CPU; 60 s leaves room for a loaded grading machine and still stops a runaway
# submission in a minute (it is reported, and the other submissions are graded).
CELL_TIMEOUT_S = 60


def local_sockets() -> Config:
    """Kernels talk to this process over local (ipc) sockets, not TCP ports.

    Nothing listens on the network, and ipykernel has no unencrypted TCP to warn about on
    every start. The socket files get an absolute prefix in Jupyter's runtime folder (the
    default prefix is relative, and a kernel started in the notebook's folder would look
    for its sockets elsewhere); the process id keeps parallel graders apart, and jupyter_client
    numbers the kernels of one process so that they never share a socket.
    """
    folder = Path(jupyter_runtime_dir())
    folder.mkdir(parents=True, exist_ok=True)
    c = Config()
    c.KernelManager.transport = "ipc"
    c.KernelManager.ip = str(folder / f"course-{os.getpid()}-ipc")
    return c


def executed_by(execute: type[Execute]) -> Config:
    """Autograding with ``execute`` in place of nbgrader's own Execute step."""
    c = Config()
    steps = Autograde.class_traits()["autograde_preprocessors"].default()
    c.Autograde.autograde_preprocessors = [execute if step is Execute else step for step in steps]
    return c


def restoring_deleted_cells() -> Config:
    """Deleted test cells put back by autograder/engine/overwrite.py, not by nbgrader's own step."""
    c = Config()
    steps = Autograde.class_traits()["sanitize_preprocessors"].default()
    c.Autograde.sanitize_preprocessors = [
        RestoringOverwriteCells if step is OverwriteCells else step for step in steps
    ]
    return c


def keeping_going() -> Config:
    """Learners' notebooks whose Run All goes on past a failing cell (autograder/engine/keep_going.py)."""
    c = Config()
    c.GenerateAssignment.preprocessors = [
        KeepGoing,
        *GenerateAssignment.class_traits()["preprocessors"].default(),
    ]
    return c


def sandboxed(workspace: Path, limits: Limits, warm: bool = True) -> Config:
    """Autograding with every kernel in the sandbox (engine/kernels/sandbox.py): the workspace hidden
    but for the submission's own folder, no network, ``limits`` on memory and CPU time, and
    caps on what it may leave in its folder (autograder/engine/submission_files.py). Warm:
    each kernel forked from a zygote that has imported torch and the checks once per grading
    process (autograder/engine/kernels/zygote.py); cold: each kernel started and importing on its own."""
    c = executed_by(WarmExecute if warm else SandboxedExecute)
    manager = c.SandboxSettings  # both kernel managers' settings
    manager.hidden = [str(workspace.resolve())]
    manager.cpp_cache = str(shared_cache(workspace))  # lesson 12's trusted builds, read-only
    c.merge(limits.to_config())  # every field of Limits, as c.SandboxSettings
    return c


def course_config(
    workspace: Path,
    release: Path | None = None,
    source: Path = SOURCE,
    cell_timeout_s: int = CELL_TIMEOUT_S,
    sandbox: Limits | None = Limits(),  # noqa: B008 (frozen: one shared default is safe)
    run_everything: bool = False,
    db_url: str | None = None,
    warm: bool = True,
) -> Config:
    """nbgrader config whose gradebook, submissions and feedback live in ``workspace``.

    The source notebooks stay in the repository; the grading workspace is outside the
    tracked tree, and what is released goes to ``release`` (by default ``release/`` in the
    workspace: never the checkout's ``course/``, where a learner's own work may lie). Grading
    kernels run in the sandbox with the ``sandbox`` limits; ``sandbox=None`` grades without it,
    with the instructor's permissions (`--unsafe`: only for code the instructor trusts). With
    ``run_everything``, grading runs the lessons' experiment cells too (by default it skips
    them: they change no score). ``db_url`` is the gradebook (any SQLAlchemy URL); by default a
    SQLite file in the workspace. ``warm`` forks sandboxed kernels from a zygote
    (autograder/engine/kernels/zygote.py) instead of starting each cold.
    """
    c = Config()
    c.CourseDirectory.course_id = COURSE_ID
    c.CourseDirectory.root = str(workspace)
    c.CourseDirectory.source_directory = str(source)
    c.CourseDirectory.release_directory = str(release or layout.release(workspace))
    c.CourseDirectory.db_url = layout.gradebook_url(workspace, db_url)
    # No learner fetches from an exchange here (submissions come from an LMS or a folder), but the
    # Formgrader's release buttons need one that exists: the workspace's own.
    c.Exchange.root = str(workspace / layout.EXCHANGE)
    c.CourseDirectory.ignore = [".ipynb_checkpoints", "*.pyc", "__pycache__", layout.FEEDBACK, "*.png"]
    c.Execute.timeout = cell_timeout_s
    c.Execute.kernel_name = "python3"
    c.merge(local_sockets())
    c.merge(executed_by(CourseExecute) if sandbox is None else sandboxed(workspace, sandbox, warm))
    c.CourseExecute.skip_experiments = not run_everything
    # The graded notebook, which the Formgrader shows, runs nothing in a page (autograder/engine/inert.py).
    execute, *after = c.Autograde.autograde_preprocessors
    c.Autograde.autograde_preprocessors = [execute, InertNotebook, *after]
    c.merge(keeping_going())
    c.ClearSolutions.code_stub = {"python": "# YOUR CODE HERE\nraise NotImplementedError()"}
    c.ClearOutput.remove_metadata_fields = ["collapsed", "scrolled", "execution"]
    # A deleted or edited test cell comes back from the source before grading.
    c.OverwriteCells.add_missing_cells = True
    c.merge(restoring_deleted_cells())
    # Warnings printed to stderr by a correct solution must not zero a test cell.
    c.IgnorePattern.enabled = True
    c.IgnorePattern.pattern = r"\w*Warning: "
    # Feedback shows the test cells without their hidden part: learners see what failed, not the answers.
    # Notebooks graded before autograder/engine/inert.py existed are made inert on the way too.
    c.GenerateFeedback.preprocessors = [
        "autograder.engine.inert.InertNotebook",
        "nbgrader.preprocessors.GetGrades",
        "nbconvert.preprocessors.CSSHTMLHeaderPreprocessor",
        "nbgrader.preprocessors.ClearHiddenTests",
    ]
    # Feedback pages that open offline: formulas typeset, tables ruled (autograder/engine/feedback_page.py)
    c.merge(offline_feedback())
    return c
