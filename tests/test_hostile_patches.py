"""The pipeline's own steps rest on no patch of nbgrader's modules.

nbgrader's API builds its feedback converter from a name in its own module; the course's
``CourseFeedback`` follows no link in a graded folder (autograder/engine/nbgrader_steps.py). Only the
configuration files put the course's converters under nbgrader's names
(autograder/engine/nbgrader_patches.py), so the pipeline builds ``CourseFeedback`` itself
(``CourseAPI``). Here a graded folder holds a link to a secret of the instructor's: through
nbgrader's own API, with its modules as nbgrader ships them, the feedback takes the secret with it;
through the pipeline's, it does not.
"""

import os
from pathlib import Path

import nbformat
import nbgrader.apps.api
import pytest
from nbformat.v4 import new_notebook
from nbgrader.apps import NbGraderAPI
from nbgrader.converters import GenerateFeedback

from autograder import lessons
from autograder.engine.pipeline import Pipeline

LESSON = "01_embedding"
SECRET = "the instructor's secret"


@pytest.fixture
def linked(tmp_path: Path, monkeypatch) -> Pipeline:
    """A workspace whose graded folder of mallory holds a link to a file of the instructor's,
    with nbgrader's modules as nbgrader ships them (no configuration file was read)."""
    monkeypatch.setattr(nbgrader.apps.api, "GenerateFeedback", GenerateFeedback)
    pipeline = Pipeline(
        tmp_path / "workspace", release=tmp_path / "release", sandbox=None, log=lambda line: None
    )
    pipeline.release([LESSON])
    with pipeline.gradebook() as gradebook:  # mallory's submission, as grading records it
        gradebook.add_student("mallory")
        gradebook.add_submission(LESSON, "mallory")
    (pipeline.workspace / "secret.txt").write_text(SECRET)
    name = lessons.notebook_name(LESSON)
    for folder in ("submitted", "autograded"):
        (pipeline.workspace / folder / "mallory" / LESSON).mkdir(parents=True)
        nbformat.write(new_notebook(), pipeline.workspace / folder / "mallory" / LESSON / name)
    os.symlink("../../../secret.txt", pipeline.workspace / "autograded" / "mallory" / LESSON / "notes.txt")
    return pipeline


def _taken(pipeline: Pipeline) -> dict[str, str]:
    feedback = pipeline.workspace / "feedback" / "mallory" / LESSON
    return {path.name: path.read_text() for path in feedback.glob("*.txt")}


def test_nbgraders_own_api_unpatched_takes_the_linked_file_into_the_feedback(linked):
    linked.api = NbGraderAPI(config=linked.setup.config())  # a stand-in that lacks the defence
    assert [page.name for page in linked.feedback()] == ["embedding.html"]
    assert _taken(linked) == {"notes.txt": SECRET}


def test_the_pipelines_feedback_takes_no_linked_file_without_any_patch(linked):
    assert [page.name for page in linked.feedback()] == ["embedding.html"]  # feedback was given
    assert _taken(linked) == {}
    assert (linked.workspace / "secret.txt").read_text() == SECRET
