"""Run All runs the whole of a learner's lesson, past a failing check.

A fresh lesson has stubs that raise, so its first check fails; JupyterLab's Run All would stop
there and leave the figures and experiments below unrun. Each code cell of the learner's copy
is tagged ``raises-exception``: JupyterLab then asks the kernel to go on after an error in it
(``stop_on_error`` false), so each failure shows where it happened and the rest still runs.
All but the cell that installs the course where it is missing (autograder/release_info.py): when
the install fails, nothing below can run, so Run All stops there with its one message instead of
a NameError in every later cell.

Grading is unchanged: nbgrader runs every cell whatever the tags (its Execute allows errors)
and scores a test cell 0 when its output holds an error. The source notebooks are not tagged:
nbval runs them, and there any error must fail the test.
"""

from nbgrader.preprocessors import NbGraderPreprocessor

from autograder.release_info import install_lines

KEEP_GOING = "raises-exception"


class KeepGoing(NbGraderPreprocessor):
    """Tags every code cell but the install cell ``raises-exception`` (a step of nbgrader's
    generate_assignment)."""

    def preprocess_cell(self, cell, resources, index):
        if cell.cell_type == "code" and not cell.source.startswith(install_lines()):
            tags = cell.metadata.setdefault("tags", [])
            if KEEP_GOING not in tags:
                tags.append(KEEP_GOING)
        return cell, resources
