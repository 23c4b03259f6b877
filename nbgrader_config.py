"""nbgrader's configuration where Jupyter and nbgrader look for it when started in this folder:
`make lab` (JupyterLab on course/, with its Validate button) and `nbgrader` commands run here.

It is the course's own configuration (autograder/engine/nbgrader_config.py) with the defaults of
`python -m autograder`: the grading workspace ./workspace, every kernel in the sandbox. The
pipeline writes a file like this one into each workspace it grades, with its own options.
"""

from pathlib import Path

from autograder.engine.kernels.sandbox import Limits
from autograder.engine.nbgrader_config import course_config
from autograder.engine.validate import validate_as_graded

c = get_config()  # noqa: F821 (Jupyter's configuration loader provides it)
c.merge(course_config(Path(__file__).resolve().parent / "workspace", sandbox=Limits()))
validate_as_graded()
