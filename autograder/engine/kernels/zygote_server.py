"""The zygote: the Python process inside a grading sandbox that forks one kernel per notebook.

zygote.py starts it (``python -P -m autograder.engine.kernels.zygote_server``) as the sandbox's
process 1, with its command pipe as stdin and stdout. It reads its configuration, imports
what every grading kernel imports (ipykernel, IPython, torch, matplotlib, ...), then serves
requests, one JSON object a line each way:

- ``{"op": "fork", "argv", "env", "cwd", "limits"}`` -> ``{"pid"}``: a child that becomes an
  ipykernel with those arguments, environment, working folder and resource limits;
- ``{"op": "poll"}`` -> ``{"exit"}``: the kernel's exit code, or null while it runs;
- ``{"op": "signal", "signum"}`` -> ``{}``: a signal to the kernel;
- ``{"op": "reset"}`` -> ``{"clean", "why"}``: every other process of the sandbox killed and
  its scratch file systems, IPC objects and message queues put back as they were when the
  zygote started. When that fails the zygote exits after replying, which ends the sandbox.

What a kernel inherits from the zygote must be the same for every notebook, so the zygote
never reads anything a kernel wrote: the file systems are swept by a throwaway child. As
process 1 of its own process namespace, it receives no signal a kernel sends it that it
does not handle (SIGKILL and SIGSTOP included), and it is not dumpable, so that no kernel
can read its memory or its file descriptors through /proc.
"""

import atexit
import ctypes
import importlib
import importlib.util
import json
import os
import platform
import resource
import signal
import stat
import sys
import threading
import time
import traceback
from typing import NoReturn

PR_SET_DUMPABLE = 4
IPC_RMID = 0
IOPRIO_GET = {"x86_64": 252, "aarch64": 31}  # ioprio_get's system call number, by machine
IOPRIO_WHO_PROCESS = 1
MPLBACKEND = "module://matplotlib_inline.backend_inline"  # what ipykernel sets before matplotlib loads
KILL_TIMEOUT_S = 10.0
SWEEP_TIMEOUT_S = 60.0
# The sweeping child's exit status, one bit per thing it could not put back.
FILES_LEFT, IPC_LEFT, SWEEP_CRASHED = 1, 2, 4
WHY = {
    FILES_LEFT: "a scratch file system could not be put back as it was",
    IPC_LEFT: "System V IPC objects remained",
    SWEEP_CRASHED: "the sweep failed",
}


class Channel:
    """The zygote's end of its command pipe: one JSON object a line each way.

    The pipe arrives as stdin and stdout; it moves to descriptors of its own, stdin becomes
    /dev/null and stdout goes where stderr goes, so that nothing the kernels print reaches it.
    """

    def __init__(self):
        self.reader = os.fdopen(os.dup(0), "rb")
        self.writer = os.dup(1)
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        os.close(devnull)
        os.dup2(2, 1)

    def receive(self) -> dict | None:
        """The next request; None when the grader closed the pipe."""
        line = self.reader.readline()
        return json.loads(line) if line else None

    def send(self, message: dict) -> None:
        data = (json.dumps(message) + "\n").encode()
        while data:
            data = data[os.write(self.writer, data) :]

    def close(self) -> None:
        self.reader.close()
        os.close(self.writer)


def set_dumpable(dumpable: bool) -> None:
    """prctl(PR_SET_DUMPABLE): a process that is not dumpable cannot be traced, nor its memory
    and file descriptors read through /proc, by a process without CAP_SYS_PTRACE."""
    if ctypes.CDLL(None, use_errno=True).prctl(PR_SET_DUMPABLE, int(dumpable), 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_DUMPABLE) failed")


# --- the scratch file systems: recorded at start, put back after each kernel ---------------

Shape = tuple  # (file type, permission bits, uid, gid, device number, size of a file, link target)


def shape_of(path: str, info: os.stat_result) -> Shape:
    """What must not change about a file that was there when the sandbox started (a folder's
    size and every time stamp change with its contents, and do not count)."""
    kind = stat.S_IFMT(info.st_mode)
    size = info.st_size if stat.S_ISREG(kind) else None
    target = os.readlink(path) if stat.S_ISLNK(kind) else None
    return (kind, stat.S_IMODE(info.st_mode), info.st_uid, info.st_gid, info.st_rdev, size, target)


def entries(root: str):
    """(relative path, path, stat) of everything under ``root`` on its own file system,
    folders before their contents; the mount points under it are listed, not entered, and
    neither is a folder that the caller removed when it was listed."""
    device = os.lstat(root).st_dev
    folders = [""]
    while folders:
        relative = folders.pop()
        with os.scandir(os.path.join(root, relative)) as listing:
            for entry in listing:
                info = entry.stat(follow_symlinks=False)
                yield os.path.join(relative, entry.name), entry.path, info
                if stat.S_ISDIR(info.st_mode) and info.st_dev == device and os.path.lexists(entry.path):
                    folders.append(os.path.join(relative, entry.name))


def record(roots: list[str]) -> dict[str, dict[str, Shape]]:
    """Each scratch file system's files as the sandbox made them: root -> relative path -> shape."""
    baseline = {}
    for root in roots:
        files = {"": shape_of(root, os.lstat(root))}
        files.update({relative: shape_of(path, info) for relative, path, info in entries(root)})
        baseline[root] = files
    return baseline


def remove(path: str) -> None:
    """Remove a file or a whole folder that a kernel made, whatever permissions it gave them."""
    if not stat.S_ISDIR(os.lstat(path).st_mode):
        os.unlink(path)
        return
    os.chmod(path, 0o700)
    with os.scandir(path) as listing:
        for entry in listing:
            remove(entry.path)
    os.rmdir(path)


def restore(path: str, now: Shape, then: Shape) -> bool:
    """Put back the permissions a kernel changed on a file the sandbox made; False when the
    file changed in a way that cannot be undone here (its type, owner, device or contents)."""
    if now == then:
        return True
    if now[:1] + now[2:] != then[:1] + then[2:] or stat.S_ISLNK(now[0]):
        return False
    os.chmod(path, then[1])
    return True


def sweep(root: str, expected: dict[str, Shape]) -> bool:
    """Put a scratch file system back as ``record`` saw it; False if that was not possible."""
    if not restore(root, shape_of(root, os.lstat(root)), expected[""]):
        return False
    found = {""}
    for relative, path, info in entries(root):
        if relative not in expected:
            remove(path)
            continue
        found.add(relative)
        if not restore(path, shape_of(path, info), expected[relative]):
            return False
    return found == set(expected)


def remove_ipc() -> bool:
    """Remove the sandbox's System V shared memory, message queues and semaphores (its own IPC
    namespace lists only them); False if any remain."""
    libc = ctypes.CDLL(None, use_errno=True)
    removers = {
        "shm": lambda ident: libc.shmctl(ident, IPC_RMID, None),
        "msg": lambda ident: libc.msgctl(ident, IPC_RMID, None),
        "sem": lambda ident: libc.semctl(ident, 0, IPC_RMID),
    }
    for kind, remover in removers.items():
        for line in ipc_objects(kind):
            remover(int(line.split()[1]))
    return not any(ipc_objects(kind) for kind in removers)


def ipc_objects(kind: str) -> list[str]:
    """The lines of /proc/sysvipc/<kind> below its header: one object each, its id second."""
    with open(f"/proc/sysvipc/{kind}") as table:
        return table.read().splitlines()[1:]


def swept(baseline: dict[str, dict[str, Shape]]) -> int:
    """Sweep everything: the exit status of the sweeping child (0, or FILES_LEFT | IPC_LEFT)."""
    status = 0
    for root, expected in baseline.items():
        try:
            clean = sweep(root, expected)
        except (OSError, RecursionError):
            clean = False
        status |= 0 if clean else FILES_LEFT
    return status | (0 if remove_ipc() else IPC_LEFT)


# --- the zygote itself --------------------------------------------------------------------


def preload(modules: list[str]) -> None:
    """Import what every kernel imports, as a kernel would: with matplotlib's backend set."""
    os.environ.setdefault("MPLBACKEND", MPLBACKEND)
    for module in modules:
        importlib.import_module(module)


def settle_threads() -> None:
    """Leave this process with its main thread alone, so that forking it is safe.

    Importing numpy starts OpenBLAS's threads, which its fork handler stops before a fork:
    a first, throwaway fork stops them here for good. matplotlib's font-cache timer ends on
    its own. Raise if any other thread remains (a module that started one must not be
    preloaded)."""
    for thread in threading.enumerate():
        if thread is not threading.main_thread():
            thread.join(timeout=5)
    child = os.fork()
    if child == 0:
        os._exit(0)
    os.waitpid(child, 0)
    if (count := thread_count()) != 1:
        raise RuntimeError(f"the zygote must hold one thread before it forks; it holds {count}")


def thread_count() -> int:
    """This process's threads, as the kernel counts them (those started in C included)."""
    return len(os.listdir("/proc/self/task"))


def io_priority() -> int:
    """This process's I/O priority (ioprio_get(2): its class and level in one number), which
    a process of the same user may change (ioprio_set) and which a fork passes on."""
    libc = ctypes.CDLL(None, use_errno=True)
    priority = libc.syscall(IOPRIO_GET[platform.machine()], IOPRIO_WHO_PROCESS, 0)
    if priority < 0:
        raise OSError(ctypes.get_errno(), "ioprio_get failed")
    return priority


def fingerprint() -> tuple:
    """What a kernel could change about the zygote (same user: its resource limits, nice value,
    I/O priority, scheduling, CPU affinity, OOM score) and would pass on to the next kernel."""
    limits = tuple(
        resource.getrlimit(getattr(resource, name)) for name in dir(resource) if name.startswith("RLIMIT_")
    )
    with open("/proc/self/oom_score_adj") as score:
        oom = score.read()
    return (
        limits,
        os.getpriority(os.PRIO_PROCESS, 0),
        io_priority(),
        os.sched_getscheduler(0),
        os.sched_getaffinity(0),
        oom,
    )


class Zygote:
    """The zygote's state: its channel, what the sandbox looked like at start, the kernel it
    forked last and that kernel's exit code once it has ended."""

    def __init__(self, channel: Channel, fresh: list[str]):
        self.channel = channel
        self.baseline = record(fresh)
        self.kernel: int | None = None
        self.exit: int | None = None
        self.fingerprint: tuple = ()

    def serve(self) -> None:
        """Answer requests until the grader closes the pipe or the sandbox cannot be reset."""
        self.fingerprint = fingerprint()
        self.channel.send({"ready": True})
        while (request := self.channel.receive()) is not None:
            try:
                reply = getattr(self, f"do_{request['op']}")(request)
            except Exception as error:  # noqa: BLE001 - a zygote that failed once is not trusted again
                self.channel.send({"error": f"{type(error).__name__}: {error}"})
                return
            self.channel.send(reply)
            if reply.get("clean") is False:
                return

    def reap(self) -> None:
        """Collect every ended child (orphans come to process 1), noting the kernel's exit."""
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            if pid == self.kernel:
                self.exit = os.waitstatus_to_exitcode(status)

    def do_fork(self, request: dict) -> dict:
        if thread_count() != 1:
            raise RuntimeError("the zygote holds more than one thread: forking it is unsafe")
        self.kernel, self.exit = None, None
        pid = os.fork()
        if pid == 0:
            become_kernel(request, self.channel)
        self.kernel = pid
        return {"pid": pid}

    def do_poll(self, request: dict) -> dict:
        self.reap()
        return {"exit": self.exit}

    def do_signal(self, request: dict) -> dict:
        self.reap()
        if self.kernel is not None and self.exit is None:
            os.kill(self.kernel, request["signum"])
        return {}

    def do_reset(self, request: dict) -> dict:
        if not self.kill_all():
            return {"clean": False, "why": "a process of the sandbox did not end"}
        status = self.sweep()
        why = [text for bit, text in WHY.items() if status & bit]
        if fingerprint() != self.fingerprint:
            why.append("a kernel changed the zygote's limits, priorities or scheduling")
        return {"clean": not why, "why": "; ".join(why)}

    def kill_all(self) -> bool:
        """SIGKILL every process of the sandbox but this one until none is left; False if some
        process outlived KILL_TIMEOUT_S."""
        deadline = time.monotonic() + KILL_TIMEOUT_S
        while True:
            self.reap()
            others = [
                int(name) for name in os.listdir("/proc") if name.isdigit() and int(name) != os.getpid()
            ]
            if not others:
                return True
            if time.monotonic() > deadline:
                return False
            for pid in others:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            time.sleep(0.005)

    def sweep(self) -> int:
        """Sweep the sandbox in a throwaway child, so that the names a kernel left never enter
        the zygote's memory; its exit status says what could not be put back."""
        child = os.fork()
        if child == 0:
            try:
                status = swept(self.baseline)
            except BaseException:  # noqa: BLE001 - any failure means: not clean
                status = SWEEP_CRASHED
            os._exit(status)
        deadline = time.monotonic() + SWEEP_TIMEOUT_S
        while (done := os.waitpid(child, os.WNOHANG))[0] == 0:
            if time.monotonic() > deadline:
                os.kill(child, signal.SIGKILL)
                os.waitpid(child, 0)
                return SWEEP_CRASHED
            time.sleep(0.005)
        return os.waitstatus_to_exitcode(done[1]) if os.WIFEXITED(done[1]) else SWEEP_CRASHED


def become_kernel(request: dict, channel: Channel) -> NoReturn:
    """In the forked child: let go of the zygote, take the notebook's environment, working
    folder and limits, and run an ipykernel as ``python -m ipykernel_launcher`` would."""
    code = 1
    try:
        channel.close()
        os.setsid()  # as jupyter_client starts a kernel: a session of its own
        signal.signal(signal.SIGINT, signal.default_int_handler)
        set_dumpable(True)
        os.environ.clear()
        os.environ.update(request["env"])
        os.chdir(request["cwd"])
        for name, value in request["limits"].items():
            resource.setrlimit(getattr(resource, name), (value, value))
        reseed()
        from ipykernel.kernelapp import IPKernelApp

        sys.argv = [importlib.util.find_spec("ipykernel_launcher").origin, *request["argv"]]
        IPKernelApp.launch_instance(argv=request["argv"])
        code = 0
    except SystemExit as exit_:
        code = exit_.code if isinstance(exit_.code, int) else int(exit_.code is not None)
    except BaseException:  # noqa: BLE001 - reported on stderr, as a kernel that fails to start
        traceback.print_exc()
    finally:
        atexit._run_exitfuncs()  # what the interpreter runs at exit (IPython saves its history)
        os._exit(code)


def reseed() -> None:
    """Draw numpy's global random state afresh, as in a new process (Python's own random
    module reseeds itself after a fork; torch's default seed is the same in every process)."""
    if "numpy" in sys.modules:
        sys.modules["numpy"].random.seed()


def main() -> None:
    """Start, as process 1 of the sandbox: read the configuration (``preload``: modules to
    import; ``fresh``: the scratch file systems the sandbox made), get ready, serve."""
    channel = Channel()
    set_dumpable(False)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a handled signal would reach process 1
    os.chdir("/")
    config = channel.receive()
    try:
        zygote = Zygote(channel, config["fresh"])
        preload(config["preload"])
        settle_threads()
    except BaseException as error:  # noqa: BLE001 - the grader says why the zygote could not start
        traceback.print_exc()
        channel.send({"error": f"{type(error).__name__}: {error}"})
        return
    zygote.serve()


if __name__ == "__main__":
    main()
