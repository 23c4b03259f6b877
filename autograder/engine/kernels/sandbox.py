"""The sandbox a grading kernel runs in: what a submission's code can see and use.

Autograding runs strangers' code with the instructor's permissions. Each grading kernel
therefore starts inside bubblewrap (`bwrap`, Debian's package `bubblewrap`):

- the whole file system is read-only: the repository (the checks, the reference), the
  Python environment, the system; the home folders (/root, /home, $HOME) are empty but
  for the repository and the Python installation when they lie there;
- the grading workspace is hidden behind an empty folder: no gradebook, no other
  student's submission or feedback; only the submission's own folder is there, writable;
- `/tmp` and `/dev/shm` are private, empty scratch folders of a capped size;
- no network (a network namespace of its own, with nothing in it);
- its own process namespace: when the kernel ends, every process it started ends too;
- its own user: when the grader runs as root, every process of the sandbox runs as nobody
  (uid and gid 65534), with no capability, so root's files stay unreadable; otherwise as
  the grader, in a user namespace of its own;
- an environment of its own: only the grader's variables that a kernel needs
  (``kernel_environment``), never its passwords, tokens or keys;
- no keyring: a seccomp filter (autograder/engine/kernels/seccomp.py) refuses the keyring's system calls,
  through which one user's kernels could pass each other keys;
- limits on memory (private writable memory, RLIMIT_DATA, per process), CPU time
  (RLIMIT_CPU), open files (RLIMIT_NOFILE) and the size of each file it writes
  (RLIMIT_FSIZE: a write past it fails with EFBIG, as Python ignores SIGXFSZ), set by the
  instructor (`Limits`); a thread of the grader ends a kernel that writes more than
  ``Limits.disk_mib`` to its folders on disk (autograder/engine/kernels/write_watch.py); where a
  cgroup can be made, one group per sandbox also caps its tasks and its whole memory, shared
  mappings and scratch files included (``sandbox_group``).

The kernel talks to the grader over ipc sockets in a private folder of its own, which is
all it shares with the outside. Where bubblewrap cannot run, `problem()` says why. Every
sandboxed process (a cold kernel, a zygote, a trusted C++ build) is started by ``launch``.
"""

import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from jupyter_client import launcher
from jupyter_client.connect import KernelConnectionInfo
from jupyter_client.manager import AsyncKernelManager
from jupyter_client.provisioning import LocalProvisioner
from jupyter_core.paths import jupyter_runtime_dir
from traitlets import List, Unicode

from autograder.engine.execute import CourseExecute
from autograder.engine.kernels import seccomp
from autograder.engine.kernels.environment import SANDBOX_VARIABLES, kernel_environment
from autograder.engine.kernels.limits import Limits, limit_trait
from autograder.engine.kernels.write_watch import WriteWatch
from autograder.engine.submission_files import clean
from autograder.lessons import ROOT

INSTALL_HINT = "install it (Debian and Ubuntu: `apt-get install bubblewrap`)"


# What a sandbox's own imports take of its memory group before a cell runs, with room to
# spare: after importing ipykernel, torch, matplotlib and the checks, a cold kernel's group
# holds 0.19 GiB, a zygote's with its first kernel 0.21 GiB (cgroup v1, torch 2.13 on the CPU);
# the rest is for the page cache of the libraries, charged to the group that reads them first.
MEMORY_HEADROOM_GIB = 0.5
SCRATCH = (Path("/tmp"), Path("/dev/shm"))  # scratch file systems of Limits.memory_gib each
FOLDER_BYTES = 64 * 2**20  # an emptied home or hidden folder: mount points and a few settings
NOBODY = 65534  # the uid of nobody and the gid of nogroup (Debian, Ubuntu, Fedora, ...)


def shared_folders(shared_cpp_cache: str) -> tuple[Path, ...]:
    """The folders a kernel reads and never writes, made if missing (bwrap binds only what exists):
    the grader's cache of trusted C++ builds (autograder/engine/cpp_cache.py), when there is one,
    which a kernel opens only by name (``open_only_by_name``)."""
    if not shared_cpp_cache:
        return ()
    folder = Path(shared_cpp_cache).resolve()
    folder.mkdir(parents=True, exist_ok=True)
    open_only_by_name(folder)
    return (folder,)


def open_only_by_name(folder: Path) -> None:
    """Let the sandbox's user reach what lies in ``folder`` by name, never list it: a kernel finds a
    build of the shared C++ cache only by the hash of a unit it holds, and learns no other name.
    Under root the kernels are nobody (0o711); otherwise they are the grader's own user, whose
    owner bits then lack reading too (0o311; the grader, too, reaches its builds by name)."""
    folder.chmod(0o311 if sandbox_user()[0] == os.geteuid() else 0o711)


def sandbox_user() -> tuple[int, int]:
    """The uid and gid the sandbox's processes run as: nobody's when the grader runs as root,
    the grader's own otherwise (an unprivileged process cannot become another user)."""
    return (NOBODY, NOBODY) if os.geteuid() == 0 else (os.geteuid(), os.getegid())


def give_to_sandbox(folder: Path) -> None:
    """Make ``folder`` and everything in it the sandbox user's, so that a kernel can write there
    (links themselves, never what they point to); nothing to do when that user is the grader."""
    _give(folder, *sandbox_user())


def take_back(folder: Path) -> None:
    """Make ``folder`` and everything in it the grader's again, once no process of the sandbox
    is left: no file the grader keeps stays writable by the sandbox's user."""
    _give(folder, os.geteuid(), os.getegid())


def _give(folder: Path, uid: int, gid: int) -> None:
    """chown ``folder`` and everything in it (links themselves, never what they point to),
    unless the sandbox's user is the grader (then there is nothing to change)."""
    if sandbox_user()[0] == os.geteuid():
        return
    os.chown(folder, uid, gid, follow_symlinks=False)
    for parent, folders, files in os.walk(folder):
        for name in folders + files:
            os.chown(os.path.join(parent, name), uid, gid, follow_symlinks=False)


def memory_cap(limits: Limits) -> int:
    """The bytes a sandbox's memory group holds: ``limits.memory_gib`` beyond its imports."""
    return int((limits.memory_gib + MEMORY_HEADROOM_GIB) * 2**30)


# cgroup v1 mounts one hierarchy per controller, v2 one for all; the files that cap a group,
# in either (those a version lacks are skipped)
CGROUPS = Path("/sys/fs/cgroup")
CONTROLLERS = {"pids": ("pids.max",), "memory": ("memory.limit_in_bytes", "memory.max")}


def cgroup_root(controller: str) -> Path | None:
    """A cgroup folder in which this process can make groups that ``controller`` caps (cgroup
    v1's hierarchy of that controller, or v2's where it is enabled); None where there is none."""
    for root in (CGROUPS / controller, CGROUPS):
        probe = root / f"course-probe-{os.getpid()}"
        try:
            probe.mkdir()
        except OSError:
            continue
        caps = any((probe / name).exists() for name in CONTROLLERS[controller])
        usable = caps and (probe / "cgroup.procs").exists()
        probe.rmdir()
        if usable:
            return root
    return None


def pids_cgroups() -> Path | None:
    """Where groups that cap their number of tasks can be made; None where nowhere."""
    return cgroup_root("pids")


class Group:
    """The cgroups one sandbox runs in, capped at its ``Limits``: one folder for each controller
    (pids, memory), the same folder for both under cgroup v2; joined together."""

    def __init__(self, folders: dict[str, Path]):
        self.folders = folders

    def distinct(self) -> list[Path]:
        """Each folder once: the groups a process joins."""
        return list(dict.fromkeys(self.folders.values()))

    def cap(self, limits: Limits) -> None:
        """Cap the tasks at ``limits.tasks`` and the memory at ``memory_cap``, swap included."""
        memory = str(memory_cap(limits))
        caps = {
            "pids": {"pids.max": str(limits.tasks)},
            "memory": {
                "memory.limit_in_bytes": memory,  # v1; memsw where swap is accounted, set after it
                "memory.memsw.limit_in_bytes": memory,
                "memory.max": memory,  # v2
                "memory.swap.max": "0",
            },
        }
        for controller, folder in self.folders.items():
            for name, value in caps[controller].items():
                if (folder / name).exists():
                    (folder / name).write_text(value)

    def join(self, command: list[str]) -> list[str]:
        """``command``, started by a shell that joins the groups first, so that every process
        of the sandbox counts from its start."""
        procs = [str(folder / "cgroup.procs") for folder in self.distinct()]
        joins = " && ".join(f'echo $$ > "${index}"' for index in range(1, len(procs) + 1))
        return ["sh", "-c", f'{joins} && shift {len(procs)} && exec "$@"', "sh", *procs, *command]

    def oom_kills(self) -> int:
        """How many processes the memory cap's OOM killer ended in this group so far (cgroup
        v2's memory.events, v1's memory.oom_control); 0 without a memory group."""
        memory = self.folders.get("memory")
        for name in ("memory.events", "memory.oom_control"):
            if memory is not None and (memory / name).exists():
                counts = dict(line.split() for line in (memory / name).read_text().splitlines())
                return int(counts.get("oom_kill", 0))
        return 0


def sandbox_group(limits: Limits) -> Group | None:
    """A new group capped at ``limits``, or None where no cgroup can be made here."""
    roots = {controller: root for controller in CONTROLLERS if (root := cgroup_root(controller))}
    made = {root: Path(tempfile.mkdtemp(prefix="course-kernel-", dir=root)) for root in set(roots.values())}
    for folder in made.values():
        folder.chmod(0o755)  # its processes may read their caps, as in any group (only root writes)
    group = Group({controller: made[root] for controller, root in roots.items()}) if roots else None
    if group is not None:
        group.cap(limits)
    return group


def remove_group(group: Group) -> None:
    """Remove a sandbox's groups once its processes are gone (they are, after the sandbox ends)."""
    for folder in group.distinct():
        for _ in range(50):
            try:
                folder.rmdir()
                break
            except FileNotFoundError:
                break
            except OSError:  # busy: its last processes are still being reaped
                time.sleep(0.1)


def problem() -> str | None:
    """None when bubblewrap can sandbox a process here; otherwise why it cannot."""
    if shutil.which("bwrap") is None:
        return f"bubblewrap (`bwrap`) is not installed: {INSTALL_HINT}"
    try:
        probe = subprocess.run(
            ["bwrap", "--ro-bind", "/", "/", "--unshare-net", "--unshare-pid", "--", "true"],
            capture_output=True,
            text=True,
            timeout=30,
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        return f"bubblewrap could not start: {error}"
    if probe.returncode != 0:
        reason = probe.stderr.strip().splitlines()[-1] if probe.stderr.strip() else f"exit {probe.returncode}"
        return f"bubblewrap cannot create namespaces on this machine ({reason})"
    if not seccomp.supported():
        known = ", ".join(seccomp.ARCHITECTURES)
        return f"the sandbox's seccomp filter knows no {platform.machine()} (it knows {known})"
    return None


def course_folders() -> list[Path]:
    """The folders ``import autograder`` is answered from: the grader's own (``ROOT``), and any
    other that a finder of this interpreter answers with. A kernel starts in the submission's
    folder, where the checkout is not on its path, and imports the course as the environment's
    finders say: an editable install may point at another checkout than the grader's."""
    found = [ROOT]
    for finder in sys.meta_path:
        spec = finder.find_spec("autograder", None) if hasattr(finder, "find_spec") else None
        if spec is not None and spec.origin:
            found.append(Path(spec.origin).resolve().parents[1])
    return found


def needed() -> list[Path]:
    """What the kernel must read even where it lies under /tmp or a home folder: the folders the
    course is imported from, the Python environment and the interpreter's own installation."""
    folders = [
        *course_folders(),
        Path(sys.prefix),
        Path(sys.base_prefix),
        Path(sys.executable).resolve().parent.parent,
    ]
    return list(dict.fromkeys(folder.resolve() for folder in folders))


def private_roots() -> list[Path]:
    """Folders the kernel sees empty: /tmp, and the home folders, where keys, tokens and
    other courses' files live (the readable folders under them are bound back)."""
    roots = [Path("/tmp"), Path("/home"), Path("/root"), Path.home()]
    return list(dict.fromkeys(root.resolve() for root in roots if root.is_dir()))


PRLIMIT_OPTIONS = {
    "RLIMIT_DATA": "--data",
    "RLIMIT_CPU": "--cpu",
    "RLIMIT_NOFILE": "--nofile",
    "RLIMIT_FSIZE": "--fsize",
}


@dataclass(frozen=True)
class SandboxSpec:
    """One sandbox, as a value: its limits, what it sees of the file system, its environment
    and its namespaces. The cold kernel manager renders it as a bwrap command that starts the
    kernel; the zygote renders the same value for itself (``as_pid_1``, no per-process limits:
    each kernel it forks sets ``rlimits()`` on itself), and reads the folders to empty between
    kernels and the variables to give them from this value, never from the command.

    Mounts, in order (the order matters: a readable folder may hold a hidden one, as the
    repository holds ./workspace, never the reverse): the ``private`` folders (private_roots())
    empty, the ``readable`` folders under them bound back read-only, the ``hidden`` folders
    emptied, then the ``shared`` ones bound back read-only (they may lie in a hidden folder: the
    grader's cache of C++ builds lies in the hidden workspace), then the ``writable`` ones."""

    limits: Limits
    writable: tuple[Path, ...] = ()
    hidden: tuple[Path, ...] = ()
    readable: tuple[Path, ...] = ()
    private: tuple[Path, ...] = (Path("/tmp"),)
    shared: tuple[Path, ...] = ()
    # the zygote: process 1 of its sandbox (no bwrap init holding its pipe's other ends, and no
    # kernel's signal reaches it), with a folder of POSIX message queues to list and empty
    as_pid_1: bool = False

    def environment(self) -> dict[str, str]:
        """The variables set inside the sandbox, over the kernel's own (``kernel_environment``)."""
        return dict(SANDBOX_VARIABLES)

    def rlimits(self) -> dict[str, int]:
        """The limits of each process (setrlimit's names)."""
        memory = int(self.limits.memory_gib * 2**30)
        return {
            "RLIMIT_DATA": memory,
            "RLIMIT_CPU": self.limits.cpu_s,
            "RLIMIT_NOFILE": self.limits.open_files,
            "RLIMIT_FSIZE": self.limits.file_mib * 2**20,
        }

    def _mounts(self) -> list[tuple[list[str], Path | None]]:
        """bwrap's mount options in order, each with the folder it makes fresh (None for a bind)."""
        scratch = int(self.limits.memory_gib * 2**30)
        mounts: list[tuple[list[str], Path | None]] = [
            (["--ro-bind", "/", "/"], None),
            (["--dev", "/dev"], Path("/dev")),
            (_scratch(Path("/dev/shm"), scratch), Path("/dev/shm")),
            (["--proc", "/proc"], None),
        ]
        if self.as_pid_1:
            mounts.append((["--mqueue", "/dev/mqueue"], Path("/dev/mqueue")))
        bound: list[Path] = []
        for root in self.private:
            mounts.append((_scratch(root, scratch if root in SCRATCH else FOLDER_BYTES), root))
        for folder in self.readable:
            if any(folder.is_relative_to(root) for root in self.private):
                mounts.append(
                    ([*_parents(folder, self.private, bound), "--ro-bind", str(folder), str(folder)], None)
                )
                bound.append(folder)
        for folder in self.hidden:
            mounts.append((["--size", str(FOLDER_BYTES), "--tmpfs", str(folder)], folder))
        for folder in self.shared:
            parents = _parents(folder, [*self.private, *self.hidden], bound)
            mounts.append(([*parents, "--ro-bind", str(folder), str(folder)], None))
        for folder in self.writable:
            parents = _parents(folder, [*self.private, *self.hidden], bound)
            mounts.append(([*parents, "--bind", str(folder), str(folder)], None))
        return mounts

    def fresh_folders(self) -> list[Path]:
        """The folders where the sandbox makes a scratch file system (/dev, /tmp, the hidden ones...)."""
        return [folder for _, folder in self._mounts() if folder is not None]

    def command(
        self,
        command: list[str],
        seccomp_fd: int | None = None,
        process_limits: bool = True,
        info_fd: int | None = None,
    ) -> list[str]:
        """``command`` run inside this sandbox. ``seccomp_fd``: where bwrap reads the keyring
        filter (seccomp.filter_fd()); ``process_limits``: ``rlimits()`` set before ``command``
        starts; ``info_fd``: where bwrap writes the sandbox's first pid (the zygote's)."""
        sandbox = ["bwrap", *[option for options, _ in self._mounts() for option in options]]
        sandbox += ["--unshare-net", "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--die-with-parent"]
        if self.as_pid_1:
            sandbox += ["--as-pid-1"]
        # started by root, bwrap would leave the kernel root's capabilities (mounts, devices, ...)
        sandbox += ["--cap-drop", "ALL"]
        options, become = _own_user()
        sandbox += options
        if seccomp_fd is not None:
            sandbox += ["--seccomp", str(seccomp_fd)]
        if info_fd is not None:
            sandbox += ["--info-fd", str(info_fd)]
        for name, value in self.environment().items():
            sandbox += ["--setenv", name, value]
        limits = [f"{PRLIMIT_OPTIONS[name]}={value}" for name, value in self.rlimits().items()]
        caps = ["prlimit", *limits, "--"] if process_limits else []
        return [*sandbox, "--", *become, *caps, *command]


def _scratch(folder: Path, size: int) -> list[str]:
    """bwrap's options for an empty tmpfs of ``size`` bytes on ``folder`` that every user of
    the sandbox may write in (sticky, as /tmp)."""
    return ["--perms", "1777", "--size", str(size), "--tmpfs", str(folder)]


def _parents(folder: Path, scratch: Sequence[Path], bound: Sequence[Path]) -> list[str]:
    """bwrap's options that make the folders between ``folder`` and the scratch file system that
    holds it, open to every user (bwrap would make them root's alone, closed to nobody); none
    when a folder bound from outside lies between, whose folders are there already."""
    mounts = [mount for mount in [*scratch, *bound] if folder.is_relative_to(mount) and folder != mount]
    nearest = max(mounts, key=lambda mount: len(mount.parts), default=None)
    if nearest is None or nearest in bound:
        return []
    between = [nearest / parent for parent in reversed(folder.relative_to(nearest).parents[:-1])]
    return [option for parent in between for option in ("--perms", "0755", "--dir", str(parent))]


def _own_user() -> tuple[list[str], list[str]]:
    """bwrap's options, and the command that starts the sandbox's first process, that run the
    sandbox as ``sandbox_user()``. As root: bwrap keeps only what setpriv needs to become
    nobody (which drops every capability, the bounding set included). bwrap's own user
    namespace would not do: started by root, it maps the sandbox's user to root outside.
    Otherwise: the grader's user, in a user namespace of the sandbox's own."""
    if os.geteuid() != 0:
        return ["--unshare-user"], []
    uid, gid = sandbox_user()
    options = [option for cap in ("CAP_SETUID", "CAP_SETGID", "CAP_SETPCAP") for option in ("--cap-add", cap)]
    become = ["setpriv", f"--reuid={uid}", f"--regid={gid}", "--clear-groups"]
    return options, [*become, "--inh-caps=-all", "--bounding-set=-all", "--"]


@dataclass(frozen=True)
class Launched:
    """A process started in a sandbox, and the group it runs in (None where no cgroup can be made
    here): ``remove_group`` it once the process has ended."""

    process: subprocess.Popen
    group: Group | None


def launch(
    spec: SandboxSpec,
    command: list[str],
    start: Callable[..., subprocess.Popen] = subprocess.Popen,
    *,
    process_limits: bool = True,
    info_fd: int | None = None,
    pass_fds: tuple[int, ...] = (),
    **options: Any,
) -> Launched:
    """Start ``command`` in ``spec``'s sandbox: the one way a cold kernel, a zygote and a trusted C++
    build start. bwrap gets the keyring filter (``seccomp.filter_fd()``, closed here once started)
    and runs in a new group capped at ``spec.limits`` (``sandbox_group``, removed here if the start
    fails). ``start`` is called as subprocess.Popen is, with ``pass_fds`` (``info_fd`` and the
    filter added) and ``options``; ``process_limits`` and ``info_fd`` go to ``spec.command``."""
    keyring_filter = seccomp.filter_fd()
    try:
        sandboxed = spec.command(
            command, seccomp_fd=keyring_filter, process_limits=process_limits, info_fd=info_fd
        )
        group = sandbox_group(spec.limits)
        passed = (*pass_fds, *([] if info_fd is None else [info_fd]), keyring_filter)
        try:
            process = start(sandboxed if group is None else group.join(sandboxed), pass_fds=passed, **options)
        except BaseException:
            if group is not None:
                remove_group(group)
            raise
    finally:
        os.close(keyring_filter)  # bwrap has its own copy, or never started
    return Launched(process, group)


class SandboxSettings(AsyncKernelManager):
    """What the instructor sets of every grading kernel's sandbox, for the cold and the warm
    kernel managers alike (configure them as ``c.SandboxSettings``): the hidden folders, and
    ``Limits``' fields, which ``limits()`` gives back as one value."""

    hidden = List(Unicode(), help="folders the kernel must not see (the grading workspace)").tag(config=True)
    memory_gib = limit_trait("memory_gib", "private writable memory per process, GiB")
    cpu_s = limit_trait("cpu_s", "CPU seconds per process")
    open_files = limit_trait("open_files", "open files per process")
    tasks = limit_trait("tasks", "processes and threads of the sandbox, where cgroups allow")
    folder_mib = limit_trait("folder_mib", "MiB of files kept of what a kernel leaves in its folder")
    folder_files = limit_trait("folder_files", "files and folders kept of what a kernel leaves")
    file_mib = limit_trait("file_mib", "MiB of the largest file a kernel's process may write")
    disk_mib = limit_trait("disk_mib", "MiB a kernel's folders may hold on disk while it runs")
    cpp_cache = Unicode("", help="the grader's cache of trusted C++ builds, bound read-only").tag(config=True)
    left_behind: list[str] = []  # what the kernel left and was not kept: replaced, never changed

    def limits(self) -> Limits:
        return Limits.from_settings(self)


class SandboxProvisioner(LocalProvisioner):
    """A LocalProvisioner that starts its kernel with ``launch`` in its manager's sandbox
    (``SandboxedKernelManager.sandbox_spec``), jupyter_client's launcher calling Popen; ``group``:
    the sandbox's cgroup while the kernel lives (None where none can be made)."""

    group: Group | None = None

    async def launch_kernel(self, cmd: list[str], **kwargs: Any) -> KernelConnectionInfo:
        launched = launch(self.parent.sandbox_spec(), cmd, start=launcher.launch_kernel, **kwargs)
        self.process, self.group = launched.process, launched.group
        self.pid = self.pgid = self.process.pid  # the launcher starts a session of its own
        self.cwd = kwargs.get("cwd", os.getcwd())
        return self.connection_info

    async def cleanup(self, restart: bool = False) -> None:
        """Once the kernel has ended: its group removed (no process of the sandbox is left)."""
        await super().cleanup(restart=restart)
        if self.group is not None:
            remove_group(self.group)
            self.group = None


class SandboxedKernelManager(SandboxSettings):
    """A kernel manager whose kernels start cold inside their own sandbox (``SandboxProvisioner``).

    The kernel's working folder (the submission's folder, as nbgrader starts it) is its
    one writable folder besides a private folder for its connection file and sockets; both
    are given to the sandbox's user. The kernel gets ``kernel_environment``'s variables only.
    """

    def hit_memory_cap(self) -> bool:
        """Whether the memory group's OOM killer ended a process of this kernel's sandbox (ask
        before the kernel is cleaned up); False where there is no memory group."""
        group = getattr(self.provisioner, "group", None)
        return group is not None and group.oom_kills() > 0

    def hit_write_cap(self) -> bool:
        """Whether the kernel was ended for writing more than ``Limits.disk_mib`` to its folders."""
        return self._watch is not None and self._watch.passed

    def _end_sandbox(self) -> None:
        """SIGKILL bubblewrap: its sandbox, every process in it, ends with it (--die-with-parent)."""
        process = getattr(self.provisioner, "process", None)
        if process is not None and process.poll() is None:
            process.kill()

    async def _async_pre_start_kernel(self, **kw):
        runtime = Path(jupyter_runtime_dir())
        runtime.mkdir(parents=True, exist_ok=True)
        self._private = Path(tempfile.mkdtemp(prefix="sandboxed-kernel-", dir=runtime))
        self._watch: WriteWatch | None = None
        self.transport = "ipc"
        self.ip = str(self._private / "ipc")
        self.connection_file = str(self._private / "kernel.json")
        self._workdir = Path(kw.get("cwd") or os.getcwd()).resolve()
        self.judge_folder = self._private  # the judge's socket: the one folder both sides reach
        # A signal to the process group would reach bubblewrap first, and end the sandbox with
        # the kernel in it; an interrupt request on the control channel reaches the kernel alone.
        self.kernel_spec.interrupt_mode = "message"
        if self.provisioner is None:
            self.provisioner = SandboxProvisioner(
                kernel_id=self.kernel_id, kernel_spec=self.kernel_spec, parent=self
            )
        command, kw = await super()._async_pre_start_kernel(**kw)  # the connection file is written
        for folder in (self._workdir, self._private):
            give_to_sandbox(folder)
        kw["env"] = kernel_environment(kw["env"], self.cpp_cache)
        return command, kw

    def sandbox_spec(self) -> SandboxSpec:
        """The kernel's sandbox: its working and private folders writable, the hidden ones hidden."""
        return SandboxSpec(
            self.limits(),
            writable=(self._workdir, self._private),
            hidden=tuple(Path(folder).resolve() for folder in self.hidden),
            readable=tuple(needed()),
            private=tuple(private_roots()),
            shared=shared_folders(self.cpp_cache),
        )

    async def _async_launch_kernel(self, kernel_cmd: list[str], **kw) -> None:
        await super()._async_launch_kernel(kernel_cmd, **kw)
        folders, cap = (self._workdir, self._private), self.limits().disk_mib * 2**20
        self._watch = WriteWatch(folders, cap, self._end_sandbox).start()

    async def _async_cleanup_resources(self, restart: bool = False) -> None:
        """Once the kernel has ended: its group removed (``SandboxProvisioner.cleanup``), its
        private folder too, and what it left in its working folder cleaned
        (autograder/engine/submission_files.py), its lines kept in ``left_behind``. Runs again,
        harmlessly, when nbclient calls it after a shutdown."""
        await super()._async_cleanup_resources(restart=restart)
        if not restart:
            if self._watch is not None:
                self._watch.stop()
            shutil.rmtree(self._private, ignore_errors=True)
            self.left_behind = [*self.left_behind, *clean(self._workdir, self.limits().caps())]
            take_back(self._workdir)

    # nbclient calls the public name after a kernel died; the base class bound it to its own method
    cleanup_resources = _async_cleanup_resources


class SandboxedExecute(CourseExecute):
    """``CourseExecute`` with every kernel started by ``SandboxedKernelManager``."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("kernel_manager_class", SandboxedKernelManager)
        super().__init__(*args, **kwargs)
