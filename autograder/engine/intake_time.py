"""When a submission was handed in, as the intake saw it, and how it knows.

Late penalties (autograder/instructor/late.py) need the moment a learner handed a lesson in,
and a learner's feedback shows it, so the moment comes from the best witness the intake has,
and says which one it was (``Handed.source``):

* ``"LMS file name"``: a Blackboard-style download names each file
  ``<assignment>_<student>_attempt_2024-01-15-10-30-00_<notebook>.ipynb``; the time in it is the
  LMS's own record of the attempt, in the course's time zone;
* ``"zip entry time"``: any other LMS download still stamps each entry of its zip with a time
  (``ZipInfo.date_time``, a wall-clock time with no zone, the zip maker's local time: read
  in the course's time zone). It is no hand-in time (docs/hand-in-times.md): Canvas's
  "Download Submissions" stamps every entry with the moment it made the zip, and Moodle's
  "Download all submissions" with its file store's time for those bytes or the moment of the
  download. So it is stated and reported, never deducted (``UNPROVEN``), and a regrade never
  takes it over a recorded time;
* ``"timestamp.txt"``: a folder collected by nbgrader's exchange holds ``timestamp.txt`` next to
  the notebooks, in nbgrader's format (``2024-01-15 10:30:00.123456 UTC``), read as nbgrader
  reads it (``nbgrader.utils.parse_utc``: a zone name or offset after the time, none meaning UTC).
  It is as trustworthy as the exchange it came from: ``nbgrader submit`` writes it with the
  learner's own permissions;
* ``"folder time"``: the last resort, the newest modification time of the folder's notebooks.

The intake ``record``s the moment next to the submission in ``submitted/<student>/<lesson>/``:
``timestamp.txt`` in nbgrader's format (always in UTC: the one zone name every reader of
that format agrees on), so nbgrader's gradebook records the same moment, and ``handed.json``,
which keeps the source too. ``read`` gives it back at export time.

The last two witnesses are the learner's own files (``LEARNER_CLAIMED``), and are named as such.
Of the LMS's, only the attempt time in a file name is its record of the hand-in (``LMS_SOURCES``).
The intake logs every notebook it takes in with its own clock (``IntakeLog``,
``<workspace>/intake_log.jsonl``); a learner's claim is flagged (``contradiction``) when it
contradicts that log (another notebook of the same lesson was taken in after the claimed time)
or the LMS's time for the same notebook. A claim nothing contradicts stands: on a first intake
from a folder, nothing here can tell a forged ``timestamp.txt`` from an honest one.

A ``timestamp.txt`` is data from outside (its folder came from a learner's hands or an
exchange): it is read only when it is a regular file, at most ``MAX_TIMESTAMP_BYTES`` of it,
and one that does not parse is reported with the reason, while the folder's time stands in.
"""

import hashlib
import json
import os
import re
import stat
import zipfile
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import dateutil.tz
from nbgrader.utils import parse_utc

# nbgrader's exchange writes "%Y-%m-%d %H:%M:%S.%f %Z" (its Exchange.timestamp_format).
NBGRADER_FORMAT = "%Y-%m-%d %H:%M:%S.%f %Z"
TIMESTAMP_FILE = "timestamp.txt"
HANDED_FILE = "handed.json"
# A timestamp is one short line; anything far longer is not one.
MAX_TIMESTAMP_BYTES = 200
# Blackboard's attempt time in a download's file names (_attempt_YYYY-MM-DD-HH-MM-SS_)
ATTEMPT_TIME = re.compile(r"(\d{4})-(\d{2})-(\d{2})-(\d{2})-(\d{2})-(\d{2})")

# The witnesses of a hand-in time, and how a statement names each.
SOURCE_WORDS = {
    "LMS file name": "the LMS's file name",
    "zip entry time": "the LMS download's file time",
    "timestamp.txt": "the timestamp.txt handed in with the work, the learner's own claim",
    "folder time": "the notebook's file time",
}
SOURCES = tuple(SOURCE_WORDS)
# The witnesses that are the learner's own files: nbgrader writes timestamp.txt with the
# learner's permissions, and a copy or `touch` sets a file's time. The LMS's are the others.
LEARNER_CLAIMED = {
    "timestamp.txt": "the learner's own timestamp.txt",
    "folder time": "the learner's own file times",
}
# The LMS's own record of when an attempt was handed in: a download's entry times are not one.
LMS_SOURCES = ("LMS file name",)
# Witnesses whose lateness is stated and never deducted: a download's entry times (when the zip
# was made, or when the LMS first stored those bytes) and a copy's file times.
UNPROVEN = ("zip entry time", "folder time")
INTAKE_LOG = "intake_log.jsonl"
# Clocks of the LMS, the exchange and this machine may differ by this much without a contradiction.
CLOCK_SLACK = timedelta(minutes=5)


class UnreadableRecord(ValueError):
    """A recorded hand-in time (handed.json, timestamp.txt) that cannot be read; says which and why."""


@dataclass(frozen=True)
class Handed:
    """The moment a submission was handed in (timezone-aware), and the witness it comes from (SOURCES)."""

    at: datetime
    source: str

    def __post_init__(self) -> None:
        if self.at.tzinfo is None or self.at.utcoffset() is None:
            raise ValueError(f"a hand-in time needs a time zone: {self.at.isoformat()} has none")
        if self.source not in SOURCES:
            raise ValueError(f"unknown source of a hand-in time: {self.source!r} (expected one of {SOURCES})")


def from_zip(info: zipfile.ZipInfo, attempt_time: str | None, zone: ZoneInfo) -> Handed:
    """The moment an LMS download says its entry ``info`` was handed in: the attempt time in the
    LMS's own part of its name (``attempt_time``, Blackboard's ``YYYY-MM-DD-HH-MM-SS``; None where
    the name has none), else the entry's own time; both read in the course's ``zone``."""
    if attempt_time is not None and (attempt := ATTEMPT_TIME.fullmatch(attempt_time)) is not None:
        try:
            return Handed(datetime(*map(int, attempt.groups()), tzinfo=zone), "LMS file name")
        except ValueError:  # month 13 and the like: the entry's own time is the next witness
            pass
    return Handed(datetime(*info.date_time, tzinfo=zone), "zip entry time")


def from_folder(folder: Path, zone: ZoneInfo) -> tuple[Handed, str | None]:
    """The moment a collected folder (``<student>/<lesson>/``) says it was handed in: its
    ``timestamp.txt``, else the newest time of its notebooks (shown in ``zone``). The second
    value is the reason a ``timestamp.txt`` there was passed over (None when there is none,
    or it was read), for the intake's problems."""
    path = folder / TIMESTAMP_FILE
    reason = None
    if os.path.lexists(path):
        try:
            return Handed(_timestamp_file(path), "timestamp.txt"), None
        except UnreadableRecord as error:
            reason = f"{error}; the folder's time is used instead"
    return _folder_time(folder, zone), reason


def _folder_time(folder: Path, zone: ZoneInfo) -> Handed:
    """The newest modification time of the folder's notebooks (regular files only), else the folder's."""
    times = [
        status.st_mtime
        for notebook in folder.glob("*.ipynb")
        if stat.S_ISREG((status := notebook.lstat()).st_mode)
    ]
    newest = max(times, default=folder.lstat().st_mtime)
    return Handed(datetime.fromtimestamp(newest, tz=zone), "folder time")


def _timestamp_file(path: Path) -> datetime:
    """The moment in an nbgrader ``timestamp.txt``, as nbgrader reads it; UnreadableRecord if it cannot."""
    if not stat.S_ISREG(path.lstat().st_mode):
        raise UnreadableRecord(f"{path.name} is not a regular file")
    with path.open("rb") as handle:
        data = handle.read(MAX_TIMESTAMP_BYTES + 1)
    if len(data) > MAX_TIMESTAMP_BYTES:
        raise UnreadableRecord(f"{path.name} is over {MAX_TIMESTAMP_BYTES} bytes: not a timestamp")
    try:
        text = data.decode("utf-8").strip()
    except UnicodeDecodeError:
        raise UnreadableRecord(f"{path.name} is not UTF-8 text") from None
    return parse_timestamp(text, path.name)


def parse_timestamp(text: str, where: str = TIMESTAMP_FILE) -> datetime:
    """``text`` in nbgrader's timestamp format, as an aware datetime in UTC. nbgrader reads a zone
    it does not know, and no zone at all, as UTC; a zone it does not know is refused here instead,
    since the moment would be off by hours."""
    shown = repr(text[:60])
    if not text:
        raise UnreadableRecord(f"{where} is empty")
    parts = text.split(" ")
    if len(parts) == 3 and not re.fullmatch(r"[+-]?\d+", parts[2]) and dateutil.tz.gettz(parts[2]) is None:
        raise UnreadableRecord(f"{where}: unknown time zone {parts[2][:40]!r} in {shown}")
    try:
        moment = parse_utc(text)
    except (ValueError, OverflowError, TypeError) as error:
        raise UnreadableRecord(f"{where}: {shown} is not a time in nbgrader's format ({error})") from None
    return moment.replace(tzinfo=UTC)


def record(submitted_folder: Path, handed: Handed) -> None:
    """Write ``handed`` next to a submission: nbgrader's ``timestamp.txt`` (in UTC) and our
    ``handed.json`` (the moment with its offset, and its source). Each file is replaced whole."""
    utc = handed.at.astimezone(UTC)
    _write(submitted_folder / TIMESTAMP_FILE, utc.strftime(NBGRADER_FORMAT) + "\n")
    what = {"at": handed.at.isoformat(), "zone": str(handed.at.tzinfo), "source": handed.source}
    _write(submitted_folder / HANDED_FILE, json.dumps(what, ensure_ascii=False) + "\n")


def _write(path: Path, text: str) -> None:
    partial = path.with_name(f".{path.name}.{os.getpid()}")
    partial.write_text(text, encoding="utf-8")
    partial.replace(path)


def read(submitted_folder: Path) -> Handed | None:
    """The hand-in moment recorded for a submission: ``handed.json``, else ``timestamp.txt``
    (source "timestamp.txt"), else None. A record that cannot be read raises UnreadableRecord."""
    ours = submitted_folder / HANDED_FILE
    if ours.is_file():
        try:
            what = json.loads(ours.read_text(encoding="utf-8"))
            moment = datetime.fromisoformat(what["at"])
            if what.get("zone"):
                moment = moment.astimezone(_zone(what["zone"], moment))
            return Handed(moment, what["source"])
        except (ValueError, KeyError, TypeError) as error:
            raise UnreadableRecord(f"{ours}: not a hand-in record ({error})") from None
    theirs = submitted_folder / TIMESTAMP_FILE
    if os.path.lexists(theirs):
        return Handed(_timestamp_file(theirs), "timestamp.txt")
    return None


def _zone(name: str, moment: datetime):
    """The zone ``name`` that ``record`` wrote (an IANA key, or a fixed offset's name such as 'UTC')."""
    try:
        return ZoneInfo(name)
    except (ValueError, LookupError):
        return moment.tzinfo


def digest(path: Path) -> str:
    """The SHA-256 of a file's bytes: which notebook the intake took in."""
    return hashlib.sha256(path.read_bytes()).hexdigest()


@dataclass(frozen=True)
class Taken:
    """One notebook the intake took in: whose, which lesson, its digest, when it was handed in
    (and the witness), and the intake's own clock at the moment it took it in."""

    student: str
    lesson: str
    digest: str
    handed: Handed
    taken: datetime


class IntakeLog:
    """Every notebook the intake took in, one JSON line each, in ``<workspace>/intake_log.jsonl``:
    the intake's own record of what it saw when, which a learner's files cannot change."""

    def __init__(self, workspace: Path):
        self.path = workspace / INTAKE_LOG

    def read(self, student: str, lesson: str) -> list[Taken]:
        """What the intake took in of ``student``'s ``lesson`` before, oldest first (a line it
        cannot read, such as one cut short by a crash, is passed over)."""
        if not self.path.is_file():
            return []
        found = []
        for line in self.path.read_text(encoding="utf-8").splitlines():
            try:
                what = json.loads(line)
                if (what["student"], what["lesson"]) == (student, lesson):
                    handed = Handed(datetime.fromisoformat(what["at"]), what["source"])
                    taken = datetime.fromisoformat(what["taken"])
                    found.append(Taken(student, lesson, what["digest"], handed, taken))
            except (ValueError, KeyError, TypeError):
                continue
        return found

    def append(self, taken: Taken) -> None:
        what = {
            "student": taken.student,
            "lesson": taken.lesson,
            "digest": taken.digest,
            "at": taken.handed.at.isoformat(),
            "source": taken.handed.source,
            "taken": taken.taken.isoformat(),
        }
        with self.path.open("a", encoding="utf-8") as handle:
            handle.write(json.dumps(what, ensure_ascii=False) + "\n")


def _shown(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")


def contradiction(earlier: list[Taken], now: Taken) -> str | None:
    """Why the hand-in time of ``now`` cannot be right, when only the learner's own files claim
    it and it contradicts the intake's own log (another notebook was taken in after the time
    claimed) or the LMS's time for the same notebook (``earlier``: what the intake took in of
    the same student and lesson before); else None. A claim later than the intake's clock is
    not one: the course's sample hand-ins are dated ahead, as a demo's are."""
    if now.handed.source not in LEARNER_CLAIMED:
        return None
    claim = now.handed.at
    said = f"hand-in time {_shown(claim)} comes only from {LEARNER_CLAIMED[now.handed.source]}"
    for before in reversed(earlier):
        if before.digest != now.digest and claim < before.taken - CLOCK_SLACK:
            return (
                f"{said}, but at {_shown(before.taken)} the intake took in another notebook of this "
                "student's lesson, so this one was handed in later; check it"
            )
        gap = abs(before.handed.at - claim)
        if before.digest == now.digest and before.handed.source in LMS_SOURCES and gap > CLOCK_SLACK:
            return f"{said}, and the LMS's time for the same notebook is {_shown(before.handed.at)}; check it"
    return None
