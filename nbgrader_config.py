"""nbgrader's configuration where Jupyter and nbgrader look for it when started in this folder:
`make lab` (JupyterLab on course/, with its Validate button) and `nbgrader` commands run here.

It is the course's own configuration (autograder/engine/nbgrader_config.py) with the defaults of
`python -m autograder`: the grading workspace ./workspace, every kernel in the sandbox. The
pipeline writes a file like this one into each workspace it grades, with its own options.
"""

from pathlib import Path

from autograder.engine.kernels.sandbox import Limits
from autograder.engine.nbgrader_config import CELL_TIMEOUT_S
from autograder.engine.nbgrader_patches import apply_course_patches
from autograder.engine.submission import Setup

workspace = Path(__file__).resolve().parent / "workspace"
setup = Setup(
    workspace,
    workspace / "release",
    CELL_TIMEOUT_S,
    Limits(),
    run_everything=False,
    db_url=f"sqlite:///{workspace / 'gradebook.db'}",
    warm=True,
)
c = get_config()  # noqa: F821 (Jupyter's configuration loader provides it)
c.merge(setup.config())
apply_course_patches(setup)  # Validate and nbgrader's commands grade as the pipeline does
