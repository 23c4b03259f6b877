"""Taking submissions in: from a folder laid out ``<student>/<lesson>/*.ipynb`` or an LMS download.

``Intake`` copies each accepted notebook to ``submitted/<student>/<lesson>/`` in the workspace,
with the moment it was handed in (autograder/engine/intake_time.py) beside it, and says in its
``problems`` why any notebook was not taken in.
"""

import re
import shutil
import stat
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from zoneinfo import ZoneInfo

import nbformat

from autograder import lessons
from autograder.engine import intake_time
from autograder.engine.submission import Problem

# How an LMS download names each file, tried in order: Blackboard's
# <assignment>_<student>_attempt_<timestamp>_<notebook>.ipynb (the example in nbgrader's
# zip_collect docs), then a plain <student>_<notebook>.ipynb.
LMS_NAMES = [
    re.compile(r"^.+?_(?P<student>[A-Za-z0-9.\-]+)_attempt_[0-9\-]+_(?P<notebook>[A-Za-z0-9_]+\.ipynb)$"),
    re.compile(r"^(?P<student>[A-Za-z0-9.\-]+)_(?P<notebook>[A-Za-z0-9_]+\.ipynb)$"),
]
# A student id becomes a folder name: a plain name, never "..", never a path.
STUDENT_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._\-]*")
# A lesson's notebook with its outputs is about 1 MiB; far larger is an upload gone wrong.
MAX_NOTEBOOK_BYTES = 50 * 2**20


def _readable(path: Path) -> str | None:
    """None when the file is a valid notebook, else the reason it is not."""
    try:
        nbformat.validate(nbformat.read(path, as_version=4))
    except Exception as error:  # noqa: BLE001 - json, nbformat and encoding errors alike
        reason = str(error).splitlines()[0] if str(error) else type(error).__name__
        return f"{path.name} is not a valid notebook ({type(error).__name__}: {reason[:160]}); not graded"
    return None


@dataclass
class Intake:
    """Takes notebooks into ``workspace/submitted/``; hand-in times are read in the course's ``zone``,
    and what is not taken in is added to ``problems``, with the reason."""

    workspace: Path
    zone: ZoneInfo
    problems: list[Problem] = field(default_factory=list)

    @property
    def submitted(self) -> Path:
        return self.workspace / "submitted"

    def collect_folder(self, folder: Path) -> None:
        """Take in ``folder/<student>/<lesson>/*.ipynb``; corrupt notebooks are reported and left out."""
        for notebook in sorted(folder.glob("*/*/*.ipynb")):
            lesson, student = notebook.parent.name, notebook.parent.parent.name
            self.take(student, lesson, notebook)

    def collect_zip(self, archive: Path, lesson: str, only: str | None = None) -> None:
        """Take in an LMS download for one lesson (file names as in LMS_NAMES); with ``only``, just
        that student's notebooks."""
        taken: dict[tuple[str, str], str] = {}
        with zipfile.ZipFile(archive) as bundle:
            for member in bundle.infolist():
                name = member.filename
                match = next(filter(None, (pattern.match(Path(name).name) for pattern in LMS_NAMES)), None)
                if match is None:
                    if name.endswith(".ipynb"):
                        self.problems.append(Problem("?", lesson, f"{name}: no student id in the name"))
                    continue
                student, notebook = match["student"], match["notebook"]
                if only is not None and student != only:
                    continue
                if not self._acceptable(student, lesson, name, member.file_size):
                    continue
                if (student, notebook) in taken:
                    what = f"{notebook} handed in twice ({taken[student, notebook]}, {name}): kept the last"
                    self.problems.append(Problem(student, lesson, what))
                taken[student, notebook] = name
                target = self.workspace / "unzipped" / student / lesson / notebook
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(bundle.read(member))
                self.take(student, lesson, target, intake_time.from_zip(member, match, self.zone))

    def _acceptable(self, student: str, lesson: str, name: str, size: int) -> bool:
        """A student id that is a plain name, and a notebook of a sane size; else a problem."""
        if not STUDENT_ID.fullmatch(student):
            what = f"{name}: {student!r} is not a student id (letters, digits, '.', '_', '-'); not graded"
            self.problems.append(Problem("?", lesson, what))
            return False
        if size > MAX_NOTEBOOK_BYTES:
            limit = MAX_NOTEBOOK_BYTES // 2**20
            what = f"{name} is {size / 2**20:.0f} MiB, over the {limit} MiB limit; not graded"
            self.problems.append(Problem(student, lesson, what))
            return False
        return True

    def take(
        self, student: str, lesson: str, notebook: Path, handed: intake_time.Handed | None = None
    ) -> None:
        """Take in one notebook of ``student`` for ``lesson``, or say in the problems why not; the
        moment it was handed in (``handed``; None: what its folder says) is recorded beside it."""
        if lesson not in lessons.LESSON_NAMES:
            self.problems.append(Problem(student, lesson, f"{notebook.name}: unknown lesson {lesson!r}"))
            return
        if not stat.S_ISREG(notebook.lstat().st_mode):  # a link an unzipped upload made, say
            self.problems.append(
                Problem(student, lesson, f"{notebook.name} is not a regular file; not graded")
            )
            return
        if not self._acceptable(student, lesson, notebook.name, notebook.stat().st_size):
            return
        reason = _readable(notebook)
        if reason is not None:
            self.problems.append(Problem(student, lesson, reason))
            return
        target = self.submitted / student / lesson / notebook.name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(notebook, target, follow_symlinks=False)
        if handed is None:
            handed, reason = intake_time.from_folder(notebook.parent, self.zone)
            if reason is not None:
                self.problems.append(Problem(student, lesson, reason))
        intake_time.record(target.parent, handed)
