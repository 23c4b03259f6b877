"""nbgrader's autograde and feedback steps, made never to follow a link in a submission's folder.

Three of nbgrader's steps touch a submission's folder by path, following links: the copy of
the folder's other files (submitted/ into autograded/, autograded/ into feedback/:
``shutil.copy``), the permission step (``os.chmod`` of every file), and the writer of the
graded notebook and of the feedback page (``open(path, "w")``: O_CREAT | O_TRUNC through a
link). A link the learner's code left there would make them copy the gradebook into the
learner's feedback, chmod a file of the repository, or write the graded notebook over the
gradebook. The course's converters do the same steps without following anything:

- the copy takes regular files only (autograder/engine/submission_files.py: ``copy_file``), and logs
  each thing it leaves out; feedback copies no file at all, only writes its pages;
- the permission step changes the files themselves (``follow_symlinks=False``): a link is
  left as it is, its target untouched;
- before the writer opens the notebook's or page's path, whatever is there is removed, so it
  creates a new file: the path is the grader's, whatever the submission left at it.

By the time these steps run, the kernel has ended and its folder has been cleaned
(engine/kernels/sandbox.py, zygote.py): no link is left there. These steps hold also
where a folder was not cleaned (grading with --unsafe, a submission's own files).

nbgrader names its converter classes in code, not in its configuration. The pipeline builds
them itself: ``CourseAutograde`` in autograder/engine/submission.py, ``CourseFeedback`` through
``CourseAPI``. nbgrader's own tools (its commands, the Formgrader) build them once the configuration
file has called ``apply_course_patches`` (autograder/engine/nbgrader_patches.py).
"""

import os
import stat
from collections import Counter
from pathlib import Path

import nbformat
from nbgrader.apps import NbGraderAPI
from nbgrader.apps.api import capture_log
from nbgrader.converters import Autograde, BaseConverter, GenerateFeedback
from nbgrader.utils import find_all_files, temp_attrs
from traitlets.config import Config

from autograder.engine.execute import SECONDS
from autograder.engine.submission_files import copy_file

GROUP_SHARED = 0o2770  # what nbgrader adds to a folder's mode when the course is group-shared


class NoFollowSteps(BaseConverter):
    """BaseConverter's steps that touch a submission's folder, none following a link."""

    def init_assignment(self, assignment_id: str, student_id: str) -> None:
        """Copy the submission's other files (not notebooks, nor what ``CourseDirectory.ignore``
        names) into the destination: regular files only."""
        source = Path(self._format_source(assignment_id, student_id))
        destination = Path(self._format_dest(assignment_id, student_id))
        for filename in find_all_files(str(source), self.coursedir.ignore + ["*.ipynb"]):
            target = destination / Path(filename).relative_to(source)
            target.parent.mkdir(parents=True, exist_ok=True)
            self.log.info("Copying %s -> %s", filename, target)
            left_out = copy_file(Path(filename), target)
            if left_out is not None:
                self.log.warning("%s, %s: %s", student_id, assignment_id, left_out)

    def set_permissions(self, assignment_id: str, student_id: str) -> None:
        """nbgrader's permission step on the files themselves: a link keeps its target's mode."""
        self.log.info("Setting destination file permissions to %s", self.permissions)
        destination = os.path.normpath(self._format_dest(assignment_id, student_id))
        permissions = int(str(self.permissions), 8)
        for folder, _, filenames in os.walk(destination):
            for filename in filenames:
                path = os.path.join(folder, filename)
                try:
                    os.chmod(path, permissions, follow_symlinks=False)
                except NotImplementedError:  # Linux cannot change a link's own mode: it is left as it is
                    self.log.warning("Not changing the permissions of %s: a symbolic link", path)
            self._share(folder)
        self._share(self.coursedir.format_path(self._output_directory, ".", "."))

    def _share(self, folder: str) -> None:
        """As nbgrader does for a group-shared course: the group may write in ``folder``."""
        mode = os.stat(folder, follow_symlinks=False).st_mode
        if not self.coursedir.groupshared or not stat.S_ISDIR(mode) or mode & GROUP_SHARED == GROUP_SHARED:
            return
        try:
            os.chmod(folder, (mode | GROUP_SHARED) & 0o2777, follow_symlinks=False)
        except PermissionError:
            self.log.warning("Could not update permissions of %s to make it groupshared", folder)

    def write_single_notebook(self, output: str, resources: dict) -> None:
        """nbgrader's writer, into a new file: whatever lies at its path is removed first."""
        name = resources["unique_key"] + resources.get("output_extension", "")
        path = Path(self._format_dest(resources["nbgrader"]["assignment"], resources["nbgrader"]["student"]))
        target = path / name
        if os.path.lexists(target) and not stat.S_ISDIR(os.lstat(target).st_mode):
            target.unlink()
        super().write_single_notebook(output, resources)


class CourseAutograde(Autograde, NoFollowSteps):
    """nbgrader's Autograde; its copy of the submission's files, its permission step and its
    writer follow no link (Autograde's own init_assignment calls NoFollowSteps'). It keeps what
    it made as values, for autograder/engine/submission.py: ``graded``, the graded notebooks as
    written, ``failure``, the first error that stopped it (nbgrader logs it and goes on), and
    ``seconds``, where the execute step's time went (``execute.SECONDS``), summed over them."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.graded: list[nbformat.NotebookNode] = []
        self.failure: BaseException | None = None
        self.seconds: Counter[str] = Counter()

    def init_assignment(self, assignment_id: str, student_id: str) -> None:
        try:
            super().init_assignment(assignment_id, student_id)
        except Exception as error:
            self.failure = self.failure or error
            raise

    def convert_single_notebook(self, notebook_filename: str) -> None:
        try:
            super().convert_single_notebook(notebook_filename)
        except Exception as error:
            self.failure = self.failure or error
            raise

    def write_single_notebook(self, output: str, resources: dict) -> None:
        super().write_single_notebook(output, resources)
        if not self._sanitizing:  # the graded notebook, not the sanitised copy written before it
            self.graded.append(nbformat.reads(output, as_version=4))
            self.seconds.update(resources.get(SECONDS, {}))


class CourseFeedback(GenerateFeedback, NoFollowSteps):
    """nbgrader's GenerateFeedback; its permission step and its writer follow no link, and it
    copies none of the graded folder's other files: a feedback page holds its figures and
    formulas (autograder/engine/feedback_page.py), and what a kernel left behind stays with the grader."""

    def init_assignment(self, assignment_id: str, student_id: str) -> None:
        """Nothing to prepare: no file but the pages goes into the feedback folder."""

    def init_notebooks(self) -> None:
        """nbgrader's list of the graded notebooks, less any that was not handed in: a notebook
        the kernel itself left in its folder is not one of the submission's, and has no grades."""
        super().init_notebooks()
        for folder, found in self.assignments.items():
            student, lesson = Path(folder).parts[-2:]
            handed_in = Path(self.coursedir.format_path(self.coursedir.submitted_directory, student, lesson))
            self.assignments[folder] = [path for path in found if (handed_in / Path(path).name).is_file()]


class CourseAPI(NbGraderAPI):
    """nbgrader's API, whose ``generate_feedback`` builds ``CourseFeedback`` itself, as nbgrader's
    own does its ``GenerateFeedback``: the pipeline's feedback follows no link, whether or not
    nbgrader's modules were patched in this process."""

    def generate_feedback(
        self, assignment_id: str, student_id: str | None = None, force: bool = True
    ) -> dict:
        """Feedback pages of one lesson (of one student's submission, when ``student_id`` is
        given): nbgrader's result, ``{"success": ..., "log": ..., "error": ...}``."""
        c = Config()
        c.HTMLExporter.template_name = "feedback"  # as nbgrader's: the template other pages share
        one = {} if student_id is None else {"student_id": student_id}
        with temp_attrs(self.coursedir, assignment_id=assignment_id, **one):
            app = CourseFeedback(coursedir=self.coursedir, parent=self)
            app.update_config(c)
            app.force = force
            return capture_log(app)
