"""A bound on what a running kernel writes to the grader's disk, all its files together.

RLIMIT_FSIZE caps each file a kernel writes, and its scratch file systems (/tmp, /dev/shm)
are tmpfs of a capped size (autograder/engine/kernels/sandbox.py). Its two folders on the
grader's disk are not: its working folder and its private folder (connection file, sockets),
which bubblewrap binds as they are. There, a kernel wrote 2 GiB in 7.9 s, and nothing stopped
it before it ended (submission_files.Caps caps what is kept, afterwards). A ``WriteWatch`` is a
thread of the grader that adds up what those folders hold (the blocks allocated, as the disk
counts them: a sparse file costs only what it holds) every ``INTERVAL_S`` while the kernel
runs, and ends the kernel once they hold more than the cap beyond what they held when it
started (the files handed in); the kernel's manager then says so
(``hit_write_cap``), and the cell it was running is reported as stopped there.

It overshoots by what the kernel writes in one interval: at the 2 GiB in 7.9 s seen, 50 MiB.
"""

import os
import stat
import threading
from collections.abc import Callable, Sequence
from pathlib import Path

INTERVAL_S = 0.2


def allocated(folders: Sequence[Path]) -> int:
    """The bytes the disk has allocated to everything in ``folders``: nothing followed, no
    recursion (a kernel may nest folders deeply), what vanishes while it is read skipped."""
    total, pending = 0, [str(folder) for folder in folders]
    while pending:
        try:
            with os.scandir(pending.pop()) as listing:
                for entry in listing:
                    try:
                        info = entry.stat(follow_symlinks=False)
                    except OSError:
                        continue
                    total += info.st_blocks * 512
                    if stat.S_ISDIR(info.st_mode):
                        pending.append(entry.path)
        except OSError:
            continue
    return total


class WriteWatch:
    """While started: every ``INTERVAL_S``, ``end_kernel()`` once ``folders`` hold more than
    ``cap_bytes`` beyond what they held at ``start()`` (then ``passed`` is True, and the watch
    stops)."""

    def __init__(self, folders: Sequence[Path], cap_bytes: int, end_kernel: Callable[[], None]):
        self.folders = tuple(folders)
        self.cap_bytes = cap_bytes
        self.passed = False
        self._end_kernel = end_kernel
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="write-watch", daemon=True)

    def start(self) -> "WriteWatch":
        self._most = allocated(self.folders) + self.cap_bytes
        self._thread.start()
        return self

    def _watch(self) -> None:
        while not self._stopped.wait(INTERVAL_S):
            if allocated(self.folders) > self._most:
                self.passed = True
                self._end_kernel()
                return

    def stop(self) -> None:
        """Stop watching (before the kernel's folders are cleaned or copied back)."""
        self._stopped.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join()
