"""What may come back from a grading kernel's folder: the one place that decides it.

A kernel's folder is hostile data: whatever the learner's code left there is read by the
grader, with the instructor's permissions. So only regular
files and folders come back; symbolic links, FIFOs, sockets and devices are dropped. Nothing
is ever followed: folders are opened with ``O_NOFOLLOW`` relative to their parent's
descriptor, and a file is opened with ``O_NOFOLLOW`` and checked on the opened descriptor, so
a link swapped in between a look and a use makes the use fail, never follow it.

- A hard-linked file is copied as its contents, each name on its own and counted on its own.
  It gives nothing a copy would not: linking needs read and write access to the file (or
  owning it: Linux's ``fs.protected_hardlinks``), and link(2) never crosses a mount, so in
  the sandbox (whose writable folder is a mount of its own) every name of it is in the folder.
- Sizes count what a file takes on disk or what it claims, whichever is larger
  (``max(st_blocks * 512, st_size)``), and a copy keeps the holes of a sparse file.
- ``Caps`` bound the bytes and the number of files and folders kept per submission; what
  passes them is not kept. Folders nested deeper than ``MAX_DEPTH`` are not kept either.
- Modes come back without set-user-id, set-group-id and sticky bits, readable and writable
  by the grader.

``mirror`` brings a warm kernel's slot back into the workspace; ``clean`` does the same in
place, in a cold kernel's folder, once the kernel has ended. Both return one short line for
each thing not kept, for the instructor's report (``FILES_METADATA`` carries them in the
graded notebook's metadata). Both run when no process of the kernel's is left.
"""

import contextlib
import errno
import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

# the graded notebook's metadata key that holds the lines of what its kernel left and was not kept
FILES_METADATA = "course_files"
MAX_DEPTH = 32  # folders in folders; an honest lesson folder nests two or three
ONE_BY_ONE = 10  # things not kept named in a line each; the rest are counted in one line
FOLDER = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
# O_NONBLOCK: a FIFO swapped in after the look opens at once (and is then refused), never waits
READ = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
WRITE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
SPECIAL_BITS = stat.S_ISUID | stat.S_ISGID | stat.S_ISVTX


@dataclass(frozen=True)
class Caps:
    """What one submission's kernel may leave in its folder, set by the instructor.

    An honest lesson folder holds the notebook (about 1 MiB with its outputs; the intake
    refuses one over 50 MiB), perhaps a figure or two, and in lesson 10 a checkpoint of its
    small model (D = 32: about 23,000 parameters, 0.1 MiB). 256 MiB holds a float32 checkpoint
    of the paper's base model (65 million parameters, 248 MiB), and a thousand files and
    folders a learner's own modules and caches a hundred times over; a hostile submission
    costs the grader's disk at most that much per lesson.
    """

    mib: int = 256  # bytes kept, in MiB: each file's max(st_blocks * 512, st_size)
    files: int = 1000  # files and folders kept


# for a folder the grader itself made: nothing in it is left out for its size or number
UNCAPPED = Caps(mib=2**40, files=2**62)


def mirror(source: Path, target: Path, caps: Caps) -> list[str]:
    """Make the folder ``target`` hold what the kernel's folder ``source`` holds, as far as
    these rules and ``caps`` keep it: what ``source`` lacks is removed from ``target``, and a
    ``source`` that is missing or not a folder (a kernel replaced it by a link) counts as
    empty. Returns a line for each thing not kept."""
    tally = _Tally(caps)
    with _opened(os.open(target, FOLDER)) as into:
        _empty(into)
        try:
            folder = os.open(source, FOLDER)
        except OSError:
            return ["left no folder of its own (removed, or replaced by a link or a file): nothing kept"]
        with _opened(folder):
            _copy_folder(folder, into, "", 0, tally)
    return tally.report()


def clean(folder: Path, caps: Caps) -> list[str]:
    """Remove from ``folder``, in place, what these rules and ``caps`` do not keep; returns a
    line for each thing removed."""
    tally = _Tally(caps)
    with _opened(os.open(folder, FOLDER)) as opened:
        _clean_folder(opened, "", 0, tally)
    return tally.report()


def copy_file(source: Path, target: Path) -> str | None:
    """Copy ``source`` to ``target`` (replacing a file, link or the like there) if it is a
    regular file; None when copied, else the line that says why not. Neither path's last part
    is followed; their folders are the grader's own."""
    with contextlib.suppress(FileNotFoundError, IsADirectoryError):
        os.unlink(target)
    tally = _Tally(UNCAPPED)
    with _opened(os.open(source.parent, FOLDER)) as origin, _opened(os.open(target.parent, FOLDER)) as into:
        mode = os.stat(source.name, dir_fd=origin, follow_symlinks=False).st_mode
        if stat.S_ISREG(mode):
            _copy_file_at(origin, into, source.name, source.name, tally)
        else:
            tally.special(origin, source.name, source.name, mode)
    return next(iter(tally.report()), None)


def remove(path: Path) -> None:
    """Remove a file, link or folder and all it holds, however deep, never what a link points to,
    even where a kernel took away the grader's own permissions."""
    with _opened(os.open(path.parent, FOLDER)) as parent:
        if stat.S_ISDIR(os.stat(path.name, dir_fd=parent, follow_symlinks=False).st_mode):
            _remove_folder(parent, path.name)
        else:
            os.unlink(path.name, dir_fd=parent)


class _Tally:
    """What a walk over a kernel's folder keeps, against the caps, and the lines of what not."""

    def __init__(self, caps: Caps):
        self.caps = caps
        self.bytes = 0
        self.entries = 0  # files and folders found
        self.lines: list[str] = []
        self.unnamed = 0  # things not kept past the first ONE_BY_ONE

    def drop(self, line: str) -> None:
        if len(self.lines) < ONE_BY_ONE:
            self.lines.append(line)
        else:
            self.unnamed += 1

    def count(self) -> bool:
        """Count one file or folder; whether it is within the cap on their number."""
        self.entries += 1
        return self.entries <= self.caps.files

    def fits(self, path: str, status: os.stat_result) -> bool:
        """Whether a file of this status fits within the cap on bytes (then it is counted)."""
        size = max(status.st_blocks * 512, status.st_size)
        if self.bytes + size > self.caps.mib * 2**20:
            cap = f"{self.caps.mib:,} MiB"
            self.drop(f"left `{_shown(path)}` ({_size(size)}), over the cap of {cap}: not kept")
            return False
        self.bytes += size
        return True

    def special(self, folder: int, name: str, path: str, mode: int) -> None:
        if stat.S_ISLNK(mode):
            target = _shown(os.readlink(name, dir_fd=folder))
            self.drop(f"left a symbolic link `{_shown(path)}` -> `{target}`: not kept")
        else:
            kind = "a FIFO" if stat.S_ISFIFO(mode) else "a socket" if stat.S_ISSOCK(mode) else "a device"
            self.drop(f"left {kind} `{_shown(path)}`: not kept")

    def failed(self, path: str, error: OSError) -> None:
        if error.errno in (errno.ELOOP, errno.ENOTDIR, errno.ENOENT):
            self.drop(f"left `{_shown(path)}`, which changed while it was copied: not kept")
        else:
            self.drop(f"left `{_shown(path)}`, which could not be read ({error.strerror}): not kept")

    def report(self) -> list[str]:
        lines = list(self.lines)
        if self.unnamed:
            what = "links, FIFOs, sockets, devices or files over a cap"
            lines.append(f"left {self.unnamed:,} more {what}: not kept")
        if self.entries > self.caps.files:
            left, cap = f"{self.entries:,} files and folders", f"{self.caps.files:,}"
            lines.append(f"left {left}, over the cap of {cap}: kept the first {cap} by name")
        return lines


def _copy_folder(source: int, target: int | None, prefix: str, depth: int, tally: _Tally) -> None:
    """Copy what ``source`` holds into ``target``; with no ``target`` (a folder over the cap),
    only count and report it."""
    for name, status in listing(source):
        path = prefix + name
        if stat.S_ISDIR(status.st_mode):
            if _too_deep(depth, path, tally):
                continue
            kept = tally.count() and target is not None
            inner = _open_at(source, name, FOLDER, path, tally)
            if inner is None:
                continue
            with _opened(inner):
                if not kept:
                    _copy_folder(inner, None, path + "/", depth + 1, tally)
                    continue
                os.mkdir(name, 0o700, dir_fd=target)
                with _opened(os.open(name, FOLDER, dir_fd=target)) as copy:
                    _copy_folder(inner, copy, path + "/", depth + 1, tally)
                    os.fchmod(copy, _mode(status) | 0o700)
        elif stat.S_ISREG(status.st_mode):
            if tally.count() and target is not None:
                _copy_file_at(source, target, name, path, tally)
        else:
            tally.special(source, name, path, status.st_mode)


def _open_at(folder: int, name: str, flags: int, path: str, tally: _Tally) -> int | None:
    """The descriptor of ``name`` in ``folder`` opened with ``flags``, or None with the failure
    tallied under ``path``."""
    try:
        return os.open(name, flags, dir_fd=folder)
    except OSError as error:
        tally.failed(path, error)
        return None


def _copy_file_at(source: int, target: int, name: str, path: str, tally: _Tally) -> None:
    """Copy the regular file ``name`` of the folder ``source`` into ``target``, if it fits."""
    opened = _open_at(source, name, READ, path, tally)
    if opened is None:
        return
    with _opened(opened):
        status = os.fstat(opened)  # of what was opened: a swap after the listing cannot win
        if not stat.S_ISREG(status.st_mode):
            tally.failed(path, OSError(errno.ENOENT, "not a regular file"))
            return
        if not tally.fits(path, status):
            return
        with _opened(os.open(name, WRITE, _mode(status), dir_fd=target)) as copy:
            _copy_data(opened, copy, status.st_size)


def _copy_data(source: int, target: int, size: int) -> None:
    """Copy the first ``size`` bytes of ``source``, its holes left holes."""
    offset = 0
    while offset < size:
        try:
            start = os.lseek(source, offset, os.SEEK_DATA)
        except OSError as error:  # ENXIO: only a hole is left
            if error.errno != errno.ENXIO:
                raise
            break
        end = min(os.lseek(source, start, os.SEEK_HOLE), size)
        os.lseek(target, start, os.SEEK_SET)
        while start < end:
            sent = os.sendfile(target, source, start, end - start)
            if sent == 0:  # the file got shorter
                break
            start += sent
        offset = end
    os.ftruncate(target, size)


def _clean_folder(folder: int, prefix: str, depth: int, tally: _Tally) -> None:
    """Remove from ``folder`` what is not kept (everything, once a cap is reached)."""
    for name, status in listing(folder):
        path = prefix + name
        mode = status.st_mode
        if stat.S_ISDIR(mode):
            if _too_deep(depth, path, tally):
                _remove_folder(folder, name)
                continue
            kept = tally.count()
            os.chmod(name, _mode(status) | 0o700, dir_fd=folder, follow_symlinks=False)
            with _opened(os.open(name, FOLDER, dir_fd=folder)) as inner:
                _clean_folder(inner, path + "/", depth + 1, tally)
            if not kept:
                os.rmdir(name, dir_fd=folder)  # emptied: all it held was past the cap too
        elif stat.S_ISREG(mode) and tally.count() and tally.fits(path, status):
            if stat.S_IMODE(mode) != _mode(status):
                os.chmod(name, _mode(status), dir_fd=folder, follow_symlinks=False)
        else:
            if not stat.S_ISREG(mode):
                tally.special(folder, name, path, mode)
            os.unlink(name, dir_fd=folder)


def _too_deep(depth: int, path: str, tally: _Tally) -> bool:
    if depth < MAX_DEPTH:
        return False
    tally.drop(f"left `{_shown(path)}`, nested more than {MAX_DEPTH} folders deep: not kept")
    return True


def _empty(folder: int) -> None:
    """Remove everything the open ``folder`` holds."""
    for name, status in listing(folder):
        if stat.S_ISDIR(status.st_mode):
            _remove_folder(folder, name)
        else:
            os.unlink(name, dir_fd=folder)


def _remove_folder(parent: int, name: str) -> None:
    """Remove the folder ``name`` of ``parent`` and all it holds, however deeply it nests, with
    one folder open at a time: it climbs back up by ``..`` (no process is left that could move
    a folder meanwhile). Each folder is made the grader's to list and empty first."""
    trail = [name]
    _make_usable(parent, name)
    folder = os.open(name, FOLDER, dir_fd=parent)
    try:
        while trail:
            inner = _first_folder(folder)
            if inner is None:
                upper = os.open("..", FOLDER, dir_fd=folder)
                os.close(folder)
                folder = upper
                os.rmdir(trail.pop(), dir_fd=folder)
                continue
            _make_usable(folder, inner)
            lower = os.open(inner, FOLDER, dir_fd=folder)
            os.close(folder)
            folder = lower
            trail.append(inner)
    finally:
        os.close(folder)


def _make_usable(parent: int, name: str) -> None:
    """Let the grader list and empty the folder ``name`` of ``parent``, whatever a kernel set."""
    if os.stat(name, dir_fd=parent, follow_symlinks=False).st_mode & 0o700 != 0o700:
        os.chmod(name, 0o700, dir_fd=parent, follow_symlinks=False)


def _first_folder(folder: int) -> str | None:
    """The name of a folder in ``folder``, once every entry before it is removed; None when
    only folders were left, and now nothing is."""
    with os.scandir(folder) as entries:
        for entry in entries:
            if entry.is_dir(follow_symlinks=False):
                return entry.name
            os.unlink(entry.name, dir_fd=folder)
    return None


def listing(folder: int) -> list[tuple[str, os.stat_result]]:
    """The entries of the open ``folder`` by name, each with its own status (links not followed)."""
    with os.scandir(folder) as entries:
        names = sorted(entry.name for entry in entries)
    found = []
    for name in names:
        with contextlib.suppress(FileNotFoundError):
            found.append((name, os.stat(name, dir_fd=folder, follow_symlinks=False)))
    return found


@contextlib.contextmanager
def _opened(descriptor: int) -> Iterator[int]:
    try:
        yield descriptor
    finally:
        os.close(descriptor)


def _mode(status: os.stat_result) -> int:
    """The permissions a kept file or folder gets: its own, without set-id and sticky bits, and
    readable and writable by the grader."""
    return stat.S_IMODE(status.st_mode) & ~SPECIAL_BITS | 0o600


def _size(size: int) -> str:
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if size >= scale:
            return f"{size / scale:.1f} {unit}"
    return f"{size} bytes"


def _shown(name: str) -> str:
    """A name as a report line shows it: undecodable bytes and control characters escaped (one
    line, whatever the name holds), and at most 80 characters."""
    text = os.fsencode(name).decode("utf-8", "backslashreplace")
    text = "".join(c if c.isprintable() else c.encode("unicode_escape").decode() for c in text)
    return text if len(text) <= 80 else f"{text[:38]}...{text[-38:]}"
