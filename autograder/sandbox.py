"""The sandbox a grading kernel runs in: what a submission's code can see and use.

Autograding runs strangers' code with the instructor's permissions. Each grading kernel
therefore starts inside bubblewrap (`bwrap`, Debian's package `bubblewrap`):

- the whole file system is read-only: the repository (the checks, the reference), the
  Python environment, the system; the home folders (/root, /home, $HOME) are empty but
  for the repository and the Python installation when they lie there;
- the grading workspace is hidden behind an empty folder: no gradebook, no other
  student's submission or feedback; only the submission's own folder is there, writable;
- `/tmp` is a private, empty scratch folder;
- no network (a network namespace of its own, with nothing in it);
- its own process namespace: when the kernel ends, every process it started ends too;
- limits on memory (private writable memory, RLIMIT_DATA, per process), CPU time
  (RLIMIT_CPU) and open files, set by the instructor (`Limits`).

The kernel talks to the grader over ipc sockets in a private folder of its own, which is
all it shares with the outside. Where bubblewrap cannot run, `problem()` says why.
"""

import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from jupyter_client.manager import AsyncKernelManager
from jupyter_core.paths import jupyter_runtime_dir
from nbclient import NotebookClient
from nbclient.exceptions import CellTimeoutError, DeadKernelError
from nbformat import NotebookNode
from nbformat.v4 import new_output
from nbgrader.preprocessors import Execute
from traitlets import Bool, Float, Integer, List, Unicode

from autograder.grading import experiments, is_test_cell, lesson_of
from autograder.lessons import ROOT

INSTALL_HINT = "install it (Debian and Ubuntu: `apt-get install bubblewrap`)"


@dataclass(frozen=True)
class Limits:
    """What one grading kernel may use. The defaults fit the lessons with room to spare:
    a lesson's kernel peaks near 0.5 GiB and uses well under a minute of CPU."""

    memory_gib: float = 4.0  # private writable memory of each process (RLIMIT_DATA)
    cpu_s: int = 600  # CPU seconds of each process (RLIMIT_CPU), all cells together
    open_files: int = 1024  # RLIMIT_NOFILE
    # processes and threads of the whole kernel (a cgroup's pids.max, where one can be made):
    # a kernel runs about 10 threads of its own plus one per core for PyTorch
    tasks: int = 512


def pids_cgroups() -> Path | None:
    """A cgroup folder in which this process can make groups that cap their number of tasks
    (cgroup v1's pids controller, or v2 with pids enabled); None where there is none."""
    for root in (Path("/sys/fs/cgroup/pids"), Path("/sys/fs/cgroup")):
        probe = root / f"course-probe-{os.getpid()}"
        try:
            probe.mkdir()
        except OSError:
            continue
        usable = (probe / "pids.max").exists() and (probe / "cgroup.procs").exists()
        probe.rmdir()
        if usable:
            return root
    return None


def task_group(limit: int) -> Path | None:
    """A new cgroup of at most ``limit`` tasks, or None where cgroups cannot be made."""
    root = pids_cgroups()
    if root is None:
        return None
    group = Path(tempfile.mkdtemp(prefix="course-kernel-", dir=root))
    (group / "pids.max").write_text(str(limit))
    return group


def remove_group(group: Path) -> None:
    """Remove a task group once its processes are gone (they are, after the sandbox ends)."""
    for _ in range(50):
        try:
            group.rmdir()
            return
        except FileNotFoundError:
            return
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
    return None


def needed() -> list[Path]:
    """What the kernel must read even where it lies under /tmp: the repository, the Python
    environment and the interpreter's own installation."""
    folders = [ROOT, Path(sys.prefix), Path(sys.base_prefix), Path(sys.executable).resolve().parent.parent]
    return list(dict.fromkeys(folder.resolve() for folder in folders))


def private_roots() -> list[Path]:
    """Folders the kernel sees empty: /tmp, and the home folders, where keys, tokens and
    other courses' files live (the readable folders under them are bound back)."""
    roots = [Path("/tmp"), Path("/home"), Path("/root"), Path.home()]
    return list(dict.fromkeys(root.resolve() for root in roots if root.is_dir()))


def wrap(
    command: list[str],
    *,
    writable: list[Path],
    hidden: list[Path],
    limits: Limits,
    readable: list[Path] = (),
    private: list[Path] = (Path("/tmp"),),
) -> list[str]:
    """``command`` run inside the sandbox: the ``private`` folders (private_roots()) empty, the
    ``readable`` folders under them bound back read-only, ``hidden`` folders emptied, then the
    ``writable`` ones bound back. The order matters: a readable folder may hold a hidden one
    (the repository holds ./workspace), never the reverse."""
    sandbox = ["bwrap", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
    for root in private:
        sandbox += ["--tmpfs", str(root)]
    for folder in readable:
        if any(folder.is_relative_to(root) for root in private):
            sandbox += ["--ro-bind", str(folder), str(folder)]
    for folder in hidden:
        sandbox += ["--tmpfs", str(folder)]
    for folder in writable:
        sandbox += ["--bind", str(folder), str(folder)]
    sandbox += ["--unshare-net", "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--die-with-parent"]
    # started by root, bwrap would leave the kernel root's capabilities (mounts, devices, ...)
    sandbox += ["--cap-drop", "ALL"]
    # In its own process namespace the kernel's parent is pid 1, which ipykernel knows never to
    # watch (the grader's pid means nothing in there). IPython and matplotlib keep their
    # settings and caches in the home folder, hidden here: they get the private /tmp.
    sandbox += ["--setenv", "JPY_PARENT_PID", "1"]
    sandbox += ["--setenv", "IPYTHONDIR", "/tmp/ipython", "--setenv", "MPLCONFIGDIR", "/tmp/matplotlib"]
    caps = [
        "prlimit",
        f"--data={int(limits.memory_gib * 2**30)}",
        f"--cpu={limits.cpu_s}",
        f"--nofile={limits.open_files}",
        "--",
    ]
    return [*sandbox, "--", *caps, *command]


class SandboxedKernelManager(AsyncKernelManager):
    """A kernel manager whose kernels run inside ``wrap``'s sandbox.

    The kernel's working folder (the submission's folder, as nbgrader starts it) is its
    one writable folder besides a private folder for its connection file and sockets.
    """

    hidden = List(Unicode(), help="folders the kernel must not see (the grading workspace)").tag(config=True)
    memory_gib = Float(Limits.memory_gib, help="private writable memory per process, GiB").tag(config=True)
    cpu_s = Integer(Limits.cpu_s, help="CPU seconds per process").tag(config=True)
    tasks = Integer(Limits.tasks, help="processes and threads of the kernel, where cgroups allow").tag(
        config=True
    )

    async def _async_pre_start_kernel(self, **kw):
        runtime = Path(jupyter_runtime_dir())
        runtime.mkdir(parents=True, exist_ok=True)
        self._private = Path(tempfile.mkdtemp(prefix="sandboxed-kernel-", dir=runtime))
        self._group: Path | None = None
        self.transport = "ipc"
        self.ip = str(self._private / "ipc")
        self.connection_file = str(self._private / "kernel.json")
        self._workdir = Path(kw.get("cwd") or os.getcwd()).resolve()
        self.judge_folder = self._private  # the judge's socket: the one folder both sides reach
        # A signal to the process group would reach bubblewrap first, and end the sandbox with
        # the kernel in it; an interrupt request on the control channel reaches the kernel alone.
        self.kernel_spec.interrupt_mode = "message"
        return await super()._async_pre_start_kernel(**kw)

    def format_kernel_cmd(self, extra_arguments: list[str] | None = None) -> list[str]:
        command = super().format_kernel_cmd(extra_arguments)
        limits = Limits(memory_gib=self.memory_gib, cpu_s=self.cpu_s, tasks=self.tasks)
        hidden = [Path(folder).resolve() for folder in self.hidden]
        writable = [self._workdir, self._private]
        sandboxed = wrap(
            command,
            writable=writable,
            hidden=hidden,
            limits=limits,
            readable=needed(),
            private=private_roots(),
        )
        self._group = task_group(limits.tasks)
        if self._group is None:
            return sandboxed
        # join the group first, so that every process of the sandbox is counted from its start
        join = 'echo $$ > "$0" && exec "$@"'
        return ["sh", "-c", join, str(self._group / "cgroup.procs"), *sandboxed]

    async def _async_cleanup_resources(self, restart: bool = False) -> None:
        await super()._async_cleanup_resources(restart=restart)
        if not restart:
            shutil.rmtree(self._private, ignore_errors=True)
            if self._group is not None:
                remove_group(self._group)
                self._group = None

    # nbclient calls the public name after a kernel died; the base class bound it to its own method
    cleanup_resources = _async_cleanup_resources


class GradingStopped(RuntimeError):
    """Grading of a notebook stopped at one cell; the message says which, and why, in plain words."""


def describe(cell: NotebookNode, index: int) -> str:
    """'the solution cell of Embedding', 'the test cell test_x', 'cell 7 (added by the learner)'."""
    meta = cell.metadata.get("nbgrader", {})
    if meta.get("solution"):
        return f"the solution cell of {meta['grade_id']}"
    if meta.get("grade"):
        return f"the test cell {meta['grade_id']}"
    return f"cell {meta['grade_id']}" if meta else f"cell {index + 1} (added by the learner)"


SKIPPED_NOTE = "(Not run while grading: this cell neither defines nor tests anything graded.)\n"


class CourseExecute(Execute):
    """nbgrader's Execute step; when the kernel dies, the error says in which cell; right after
    each test cell, the independent judge (autograder/judge.py) runs it again outside the
    kernel, and a test cell that passed only inside it is failed with the judge's reason.
    The lesson's experiment cells (figures, timings) are skipped, as the source notebook marks
    them (grading.experiments); a learner's own cells always run."""

    skip_experiments = Bool(True, help="Skip the lesson's experiment cells while grading.").tag(config=True)

    def _skipped(self, resources) -> frozenset[str]:
        lesson = lesson_of(resources)
        return experiments(lesson) if self.skip_experiments and lesson else frozenset()

    def preprocess(self, nb, resources=None, km=None):
        # nbconvert's ExecutePreprocessor.preprocess, with the judge while the kernel is up
        NotebookClient.__init__(self, nb, km)
        self.reset_execution_trackers()
        self._check_assign_resources(resources)
        from autograder import judge  # imports torch and the checks: only when grading

        self._exited_in = None
        with self.setup_kernel():
            info = self.wait_for_reply(self.kc.kernel_info())
            self.nb.metadata["language_info"] = info["content"]["language_info"]
            self._judge = judge.for_notebook(self, resources)
            skipped = self._skipped(resources)
            try:
                for index, cell in enumerate(self.nb.cells):
                    if cell.metadata.get("nbgrader", {}).get("grade_id") in skipped:
                        cell.outputs = [new_output("stream", name="stdout", text=SKIPPED_NOTE)]
                        continue
                    self.preprocess_cell(cell, resources, index)
                    if self._exited_in:  # the kernel stops a moment after exit(): stop here, not in a race
                        raise GradingStopped(f"the kernel exited after exit() in {self._exited_in}")
                    if self._judge is not None and is_test_cell(cell):
                        self._judge.cell(cell)
            finally:
                if self._judge is not None:
                    self._judge.close(self.nb)
        self.set_widgets_metadata()
        return self.nb, self.resources

    def on_cell_executed(self, **kwargs):
        super().on_cell_executed(**kwargs)
        # exit() in a cell ends the kernel just after that cell: the next cell finds it dead
        if any(p.get("source") == "ask_exit" for p in kwargs["execute_reply"]["content"].get("payload", [])):
            self._exited_in = describe(kwargs["cell"], kwargs["cell_index"])

    def preprocess_cell(self, cell, resources, index):
        try:
            return super().preprocess_cell(cell, resources, index)
        except DeadKernelError as error:
            exited_in = getattr(self, "_exited_in", None)
            where = f"after exit() in {exited_in}" if exited_in else f"while running {describe(cell, index)}"
            raise GradingStopped(f"the kernel exited {where}") from error
        except CellTimeoutError as error:  # interrupted at the time limit, and it went on running
            raise GradingStopped(
                f"{describe(cell, index)} ran past the {self.timeout} s limit and did not stop when "
                "interrupted (it ignores interrupts)"
            ) from error


class SandboxedExecute(CourseExecute):
    """``CourseExecute`` with every kernel started by ``SandboxedKernelManager``."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("kernel_manager_class", SandboxedKernelManager)
        super().__init__(*args, **kwargs)
