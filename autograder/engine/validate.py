"""nbgrader's Validate button and `nbgrader validate` give the verdict grading gives.

nbgrader's Validator runs a notebook with a fixed list of steps (a class attribute, not a
configuration setting): its own Execute, and no IgnorePattern. So a correct solution that
prints a warning fails every test cell in Validate while grading gives it full marks, and
Validate runs lesson 10's training, which grading skips. ``GRADING_STEPS`` are the course's steps
for that list; the course's configuration files put them there (``apply_course_patches``,
autograder/engine/nbgrader_patches.py).

Validate runs the learner's copy, whose test cells hold the visible checks only: the hidden
tests and the independent judge run at grading, never on a learner's machine.
"""

from pathlib import Path

from nbgrader.preprocessors import CheckCellMetadata, ClearOutput, IgnorePattern

from autograder.engine.execute import CourseExecute


class ValidateExecute(CourseExecute):
    """The course's Execute step, for the Validator. The Validator runs it in the notebook's
    folder and passes no resources, so the lesson is the folder's name (``course/03_attention``):
    its experiment cells are skipped, as grading skips them. No judge runs (it needs resources
    that name the lesson being graded)."""

    def _skipped(self, resources) -> frozenset[str]:
        return super()._skipped({"nbgrader": {"assignment": Path.cwd().name}})


# The Validator's steps, as grading runs them: the course's Execute, then warnings on stderr
# dropped (IgnorePattern, configured in course_config) before a cell's outputs are judged.
GRADING_STEPS = [CheckCellMetadata, ClearOutput, ValidateExecute, IgnorePattern]
