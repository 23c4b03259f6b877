"""Taking submissions in: from a folder laid out ``<student>/<lesson>/*.ipynb`` or an LMS download.

``Intake`` copies each accepted notebook to ``submitted/<student>/<lesson>/`` in the workspace,
with the moment it was handed in (autograder/engine/intake_time.py) beside it, and says in its
``problems`` why any notebook was not taken in.

Whose work a file in an LMS download is comes from the LMS's own part of its name (or its
submission record), never from the part the learner chose: every LMS below puts the learner's
own file name last, after a prefix it writes itself, and the intake reads that prefix from the
start of the name. A learner's file whose name claims another student is refused and
reported. Of an attempt's notebooks the one named as the lesson's (``attention.ipynb``) is
graded; an attempt with a single notebook under another name has it graded under the lesson's
name, with a line in the problems; one with several and none of the lesson's name has none
taken in, and says so. The downloads read
(their naming as the LMSs' downloads and public tools that unpack them show it):

* **Canvas** ("Download Submissions"): ``<name>[_LATE]_<user id>_<submission id>_<file>``, e.g.
  ``doejane_LATE_123456_7890123_attention-1.ipynb``. ``<name>`` is the learner's sortable name
  run together (no ``_``); Canvas adds ``-1``, ``-2`` to a file name the learner had handed in
  before. The student is Canvas's numeric **user id** (the roster's ``student`` and
  ``canvas_id``); the name is never used, since learners can set it.
* **Moodle** ("Download all submissions"):
  ``<full name>_<participant id>_assignsubmission_file_<file>``, or that prefix as a folder
  (``..._assignsubmission_file_/<file>``). Moodle writes the full name with ``_`` turned into
  spaces. The student is Moodle's numeric **participant id**.
* **Blackboard** ("Assignment File Download"):
  ``<assignment>_<user name>_attempt_<YYYY-MM-DD-HH-MM-SS>_<file>``, and for each attempt a
  record ``<assignment>_<user name>_attempt_<time>.txt`` whose first line is
  ``Name: <full name> (<user name>)``. The first ``_attempt_<time>`` in a name is Blackboard's.
  As the assignment and the user name may both hold ``_`` (``j_doe``), the **user name** is the
  one the attempt's record gives; without a record, what follows the assignment name another
  attempt's record showed, or the lesson's name (``03_attention_j_doe_attempt_...``); else the
  file is refused, saying why.
* Files named ``<student>_<notebook>`` (a zip an instructor made), at the top of the zip.

All notebooks of one download are read by one LMS's naming: the one that fits most of them
(Canvas, then Moodle, then Blackboard on a tie), so a learner's file name cannot make the
intake read an honest download as another LMS's. A notebook that fits neither that naming
nor ``<student>_<notebook>`` is refused and reported. A student with two notebooks for the
lesson in one download gets neither taken in from it: both are reported.
"""

import re
import shutil
import stat
import zipfile
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path, PurePosixPath
from zoneinfo import ZoneInfo

import nbformat

from autograder import lessons
from autograder.engine import intake_time
from autograder.engine import workspace as layout
from autograder.engine.submission import Problem
from autograder.engine.workspace import STUDENT_ID, STUDENT_ID_RULE, Key

# A lesson's notebook with its outputs is about 1 MiB; far larger is an upload gone wrong.
MAX_NOTEBOOK_BYTES = 50 * 2**20
# A Blackboard attempt record is a few lines of text (and the learner's comments).
MAX_RECORD_BYTES = 64 * 2**10

# Each LMS's name for a file of an attempt, matched from the start of the entry's name.
CANVAS = re.compile(r"(?P<name>[^\W_]+)(?:_LATE|_late)?_(?P<student>\d+)_\d+_(?P<file>[^/]+)")
MOODLE = re.compile(r"(?P<name>[^_/]+)_(?P<student>\d+)_assignsubmission_file_/?(?P<file>.+)")
BLACKBOARD = re.compile(
    r"(?P<attempt>(?P<owner>[^/]+?)_attempt_(?P<time>\d{4}(?:-\d{2}){5}))(?:_(?P<file>[^/]+)|(?P<record>\.txt))"
)
NAMINGS = {"Canvas": CANVAS, "Moodle": MOODLE, "Blackboard": BLACKBOARD}  # in this order on a tie
# The first line of a Blackboard attempt record: "Name: Jane Doe (j_doe)"
RECORD_NAME = re.compile(r"Name: .*\((?P<user>[^()\s]+)\)\s*")
# Canvas's mark of a file name the learner had handed in before: attention-1.ipynb
CANVAS_AGAIN = re.compile(r"-\d+(?=\.ipynb$)")


@dataclass(frozen=True)
class Entry:
    """A notebook of a download: its name there, whose attempt it is (from the LMS's part of the
    name), the learner's own file name, and Blackboard's attempt time (None elsewhere)."""

    name: str
    student: str
    file: str
    attempt_time: str | None = None


def _readable(path: Path) -> str | None:
    """None when the file is a valid notebook, else the reason it is not."""
    try:
        nbformat.validate(nbformat.read(path, as_version=4))
    except Exception as error:  # noqa: BLE001 - json, nbformat and encoding errors alike
        reason = str(error).splitlines()[0] if str(error) else type(error).__name__
        return f"{path.name} is not a valid notebook ({type(error).__name__}: {reason[:160]}); not graded"
    return None


def _blackboard_records(bundle: zipfile.ZipFile) -> dict[str, tuple[str, str]]:
    """attempt (``<assignment>_<user>_attempt_<time>``) -> (assignment, user name), from the
    attempts' records; a record whose user name does not end its own owner part is passed over."""
    records = {}
    for member in bundle.infolist():
        match = BLACKBOARD.fullmatch(member.filename)
        if match is None or match["record"] is None or member.file_size > MAX_RECORD_BYTES:
            continue
        first = bundle.read(member).decode("utf-8-sig", errors="replace").splitlines()[:1]
        said = RECORD_NAME.fullmatch(first[0]) if first else None
        owner = match["owner"]
        if said is not None and owner.endswith("_" + said["user"]):
            records[match["attempt"]] = (owner[: -len(said["user"]) - 1], said["user"])
    return records


def _blackboard_student(match: re.Match, records: dict[str, tuple[str, str]], lesson: str) -> str | None:
    """The user name of a Blackboard attempt: its record's, else what follows an assignment name
    another record showed, or the lesson's name; None when the name alone cannot tell."""
    if match["attempt"] in records:
        return records[match["attempt"]][1]
    owner = match["owner"]
    for assignment in sorted({a for a, _ in records.values()} | {lesson}, key=len, reverse=True):
        if owner.startswith(assignment + "_") and len(owner) > len(assignment) + 1:
            return owner[len(assignment) + 1 :]
    return None


def _plain(name: str, lesson: str) -> str | None:
    """The student of a top-level ``<student>_<notebook>`` name, else None."""
    suffix = "_" + lessons.notebook_name(lesson)
    return name[: -len(suffix)] if "/" not in name and name.endswith(suffix) and name != suffix else None


def read_download(bundle: zipfile.ZipFile, lesson: str) -> tuple[list[Entry], list[Problem]]:
    """The notebooks of an LMS download, each with the student whose attempt it is, and a
    problem for each notebook the intake cannot place."""
    expected = lessons.notebook_name(lesson)
    notebooks = [m.filename for m in bundle.infolist() if m.filename.endswith(".ipynb") and not m.is_dir()]
    fits = {lms: sum(bool(pattern.fullmatch(n)) for n in notebooks) for lms, pattern in NAMINGS.items()}
    lms = max(NAMINGS, key=lambda key: fits[key])  # the first of the most fitting, on a tie
    records = _blackboard_records(bundle) if lms == "Blackboard" else {}
    entries, refused = [], []
    for name in notebooks:
        match = NAMINGS[lms].fullmatch(name) if fits[lms] else None
        if match is not None and lms == "Blackboard":
            student = _blackboard_student(match, records, lesson)
            if student is None:
                what = (
                    f"{name}: Blackboard's name does not tell where the assignment ends and the user "
                    "name begins, and the download holds no record of the attempt (its .txt); not taken in"
                )
                refused.append(Problem("?", lesson, what))
                continue
            entries.append(Entry(name, student, match["file"], match["time"]))
        elif match is not None:
            file = PurePosixPath(match["file"]).name  # Moodle keeps the learner's folders
            if lms == "Canvas":
                file = CANVAS_AGAIN.sub("", file)
            entries.append(Entry(name, match["student"], file))
        elif (student := _plain(name, lesson)) is not None:
            entries.append(Entry(name, student, expected))
        else:
            way = (
                f"{lms} names a hand-in (the LMS its names fit best)"
                if fits[lms]
                else "an LMS names a hand-in"
            )
            what = f"{name}: not named as {way} nor as <student>_{expected}; not taken in"
            refused.append(Problem("?", lesson, what))
    return entries, refused


def claimed_student(file: str, lesson: str) -> str | None:
    """The student a learner's own file name claims to be from, read as any LMS or as
    ``<student>_<notebook>`` would name it; None when it names nobody."""
    for lms, pattern in NAMINGS.items():
        if (match := pattern.fullmatch(file)) is not None:
            if lms != "Blackboard":
                return match["student"]
            return _blackboard_student(match, {}, lesson) or match["owner"].rpartition("_")[2]
    return _plain(file, lesson)


@dataclass
class Intake:
    """Takes notebooks into ``workspace/submitted/``; hand-in times are read in the course's ``zone``,
    and what is not taken in is added to ``problems``, with the reason."""

    workspace: Path
    zone: ZoneInfo
    problems: list[Problem] = field(default_factory=list)

    def collect_folder(self, folder: Path) -> None:
        """Take in ``folder/<student>/<lesson>/*.ipynb``; corrupt notebooks are reported and left out."""
        for notebook in sorted(folder.glob("*/*/*.ipynb")):
            lesson, student = notebook.parent.name, notebook.parent.parent.name
            self.take(student, lesson, notebook)

    def collect_zip(self, archive: Path, lesson: str, only: str | None = None) -> set[str]:
        """Take in an LMS download for one lesson (its naming: this module's docstring); with
        ``only``, just that student's attempt. Returns the students the download holds a notebook
        of (``only``: that one, if it does)."""
        expected = lessons.notebook_name(lesson)
        with zipfile.ZipFile(archive) as bundle:
            entries, refused = read_download(bundle, lesson)
            self.problems += [p for p in refused if only is None or p.student in (only, "?")]
            mine = [entry for entry in entries if only is None or entry.student == only]
            owned = [entry for entry in mine if self._owned(entry, lesson)]
            for student in sorted({entry.student for entry in owned}):
                entry = self._the_notebook([e for e in owned if e.student == student], lesson, expected)
                if entry is None:
                    continue
                member = bundle.getinfo(entry.name)
                if not self._acceptable(student, lesson, entry.name, member.file_size):
                    continue
                target = self.workspace / layout.UNZIPPED / student / lesson / expected
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(bundle.read(member))
                handed = intake_time.from_zip(member, entry.attempt_time, self.zone)
                self.take(student, lesson, target, handed)
        return {entry.student for entry in mine}

    def _owned(self, entry: Entry, lesson: str) -> bool:
        """False, with a problem, when the learner's own file name claims another student."""
        claimed = claimed_student(entry.file, lesson)
        if claimed is None or claimed == entry.student:
            return True
        what = f"{entry.name}: a file in {entry.student}'s attempt named as {claimed}'s hand-in; refused"
        self.problems.append(Problem(entry.student, lesson, what))
        return False

    def _the_notebook(self, theirs: list[Entry], lesson: str, expected: str) -> Entry | None:
        """The one notebook of a student's attempt to grade: the one named as the lesson's, else
        the only notebook there is (a learner who renamed it, "attention (1).ipynb"); None, with
        a problem, when the attempt holds several and none or more than one is the lesson's."""
        student = theirs[0].student
        exact = [entry for entry in theirs if entry.file == expected]
        if len(exact) == 1:
            for other in theirs:
                if other is not exact[0]:
                    what = f"{other.name}: another notebook beside {expected} in the attempt; not taken in"
                    self.problems.append(Problem(student, lesson, what))
            return exact[0]
        if len(theirs) == 1:
            [entry] = theirs
            what = f"{entry.name}: the learner named the notebook {entry.file!r}; taken in as {expected}"
            self.problems.append(Problem(student, lesson, what))
            return entry
        names = ", ".join(entry.name for entry in theirs)
        what = f"{len(theirs)} notebooks in the attempt ({names}), none named {expected}: none taken in"
        if len(exact) > 1:
            what = f"{expected} handed in {len(theirs)} times ({names}): none taken in; keep one"
        self.problems.append(Problem(student, lesson, what))
        return None

    def _acceptable(self, student: str, lesson: str, name: str, size: int) -> bool:
        """A student id that is a plain name, and a notebook of a sane size; else a problem."""
        if not STUDENT_ID.fullmatch(student):
            what = f"{name}: {student!r} is not a student id ({STUDENT_ID_RULE}); not graded"
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
        moment it was handed in (``handed``; None: what its folder says) is recorded beside it,
        and one that only the learner's own files claim is checked against the intake's log."""
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
        target = layout.submission(self.workspace, Key(student, lesson)) / notebook.name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(notebook, target, follow_symlinks=False)
        if handed is None:
            handed, reason = intake_time.from_folder(notebook.parent, self.zone)
            if reason is not None:
                self.problems.append(Problem(student, lesson, reason))
        intake_time.record(target.parent, handed)
        log = intake_time.IntakeLog(self.workspace)
        taken = intake_time.Taken(student, lesson, intake_time.digest(target), handed, datetime.now(UTC))
        contradiction = intake_time.contradiction(log.read(student, lesson), taken)
        if contradiction is not None:
            self.problems.append(Problem(student, lesson, contradiction))
        log.append(taken)
