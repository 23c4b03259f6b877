"""The course's changes to nbgrader's own classes and modules, made in one function.

nbgrader's own tools (the Formgrader, its Validate button, its `nbgrader` commands) build their
steps from names in nbgrader's modules, which no configuration setting reaches. So that they
grade, validate and give feedback as `python -m autograder` does, ``apply_course_patches`` puts the
course's steps under those names: the Autograde button and `nbgrader autograde` grade through
``verdicts.grade`` (and so record the verdict), Validate runs grading's steps, and feedback follows
no link. Only the configuration files that Jupyter and nbgrader read call it: nbgrader_config.py
at the repository's root, and the one the pipeline writes into each workspace
(``pipeline.CONFIG_FILE``); tests/test_jupyter_config.py fails if any other module does.
The course's own code never rests on them: the pipeline builds ``CourseAutograde``
(autograder/engine/submission.py) and ``CourseFeedback`` (``nbgrader_steps.CourseAPI``) itself.
"""

from pathlib import Path

import nbgrader.apps.api
import nbgrader.apps.autogradeapp
import nbgrader.apps.generatefeedbackapp
from nbgrader.apps import NbGraderAPI
from nbgrader.converters import NbGraderException
from nbgrader.validator import Validator

from autograder.engine import verdicts
from autograder.engine.nbgrader_steps import CourseAutograde, CourseFeedback
from autograder.engine.submission import Setup
from autograder.engine.validate import GRADING_STEPS

# Every name apply_course_patches sets: (where, which name)
PATCHED = [
    (nbgrader.apps.api, "Autograde"),
    (nbgrader.apps.api, "GenerateFeedback"),
    (nbgrader.apps.generatefeedbackapp, "GenerateFeedback"),
    (NbGraderAPI, "autograde"),
    (nbgrader.apps.autogradeapp, "Autograde"),
    (Validator, "preprocessors"),
]


def _use_course_steps() -> None:
    """nbgrader's API (the Formgrader's) and its `generate_feedback` command build
    ``CourseAutograde`` and ``CourseFeedback``, which follow no link in a submission's folder
    (autograder/engine/nbgrader_steps.py), where those modules look up the converters they build."""
    nbgrader.apps.api.Autograde = CourseAutograde
    for module in (nbgrader.apps.api, nbgrader.apps.generatefeedbackapp):
        module.GenerateFeedback = CourseFeedback


def _grade_as_the_pipeline(setup: Setup) -> None:
    """The Formgrader's Autograde button and the `nbgrader autograde` command grade through
    ``verdicts.grade``, as the pipeline does, and so record the verdict; each says what went wrong."""

    def autograde(api: NbGraderAPI, assignment_id: str, student_id: str, force=True, create=True) -> dict:
        graded = verdicts.grade(setup, assignment_id, student_id)
        result = {"success": graded.failure is None, "log": "\n".join(p.what for p in graded.problems)}
        if graded.failure is not None:
            result["error"] = graded.failure
        return result

    class CommandAutograde(CourseAutograde):
        """`nbgrader autograde`'s converter: the submissions nbgrader's own search finds, each
        graded through ``verdicts.grade``."""

        def start(self) -> None:
            self.init_notebooks()  # nbgrader's search of submitted/, and its errors when none is found
            failed = []
            for folder in sorted(self.assignments):
                student, lesson = Path(folder).parts[-2:]
                graded = verdicts.grade(setup, lesson, student)
                for problem in graded.problems:
                    self.log.warning("%s, %s: %s", student, lesson, problem.what)
                if graded.failure is not None:
                    failed.append(f"{student}, {lesson}")
            if failed:
                raise NbGraderException(f"autograding failed: {'; '.join(failed)}")

    NbGraderAPI.autograde = autograde
    nbgrader.apps.autogradeapp.Autograde = CommandAutograde


def _validate_as_graded() -> None:
    """nbgrader's Validator (the Validate button, `nbgrader validate`) runs notebooks with the
    steps grading runs them with (autograder/engine/validate.py)."""
    Validator.preprocessors = list(GRADING_STEPS)


def apply_course_patches(setup: Setup) -> None:
    """Make nbgrader's own tools in this process grade, validate and give feedback as ``setup``
    grades; for the configuration files only (see above)."""
    _use_course_steps()
    _grade_as_the_pipeline(setup)
    _validate_as_graded()
