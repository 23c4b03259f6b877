"""Warm grading kernels: one zygote per grading process, one forked kernel per notebook.

A cold grading kernel (autograder/engine/kernels/sandbox.py) spends about a second starting and three
importing torch, matplotlib and the checks. Here those imports happen once per grading
process, in a zygote (autograder/engine/kernels/zygote_server.py) that lives in a sandbox like a cold
kernel's and forks a kernel for each notebook; no notebook sees what another left:

- the sandbox is started by ``sandbox.launch``, with the same hidden, private and readable folders,
  limits, user, keyring filter and allow-listed environment, in one group (``sandbox_group``:
  tasks and memory) with its kernels, and with no capabilities: the zygote is its process 1,
  so no kernel can signal it, and it is not dumpable, so no kernel can read its memory or
  its pipe;
- its two writable folders are this process's ``Home``: ``run`` holds each kernel's private
  folder (connection file, sockets, the judge's socket: ``judge_folder``), ``slot`` a copy of
  the notebook's folder, which the kernel works in (at the same path below the hidden
  workspace, so ``../..`` shows only the kernel's own folder), copied back when it ends;
- after each kernel, every other process of the sandbox is killed, its scratch file
  systems (/tmp, /dev/shm, the empty home folders, ...), IPC objects and message queues
  are put back as the sandbox made them, and ``run`` and ``slot`` are emptied. When any of
  that fails, or the zygote dies, it is replaced: a failure costs time, never isolation.

``WarmKernelManager`` is the kernel manager (same settings as ``SandboxedKernelManager``)
and ``WarmExecute`` the nbgrader step that uses it. A process grades one warm kernel at a
time. ``shutdown()`` (also run at exit) ends the process's zygote.
"""

import ast
import asyncio
import atexit
import functools
import json
import multiprocessing.util
import os
import select
import shutil
import signal
import subprocess
import tempfile
import threading
import time
import weakref
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from jupyter_client.asynchronous import AsyncKernelClient
from jupyter_client.connect import KernelConnectionInfo
from jupyter_client.provisioning import LocalProvisioner
from jupyter_core.paths import jupyter_runtime_dir
from traitlets import DottedObjectName, Enum, Type

from autograder import grading, lessons
from autograder.engine import submission_files
from autograder.engine.execute import CourseExecute
from autograder.engine.kernels.environment import kernel_environment
from autograder.engine.kernels.ready_client import ReadyKernelClient
from autograder.engine.kernels.sandbox import (
    Group,
    Limits,
    SandboxSettings,
    SandboxSpec,
    give_to_sandbox,
    launch,
    needed,
    private_roots,
    remove_group,
    shared_folders,
)
from autograder.engine.kernels.sandbox import problem as sandbox_problem
from autograder.engine.kernels.write_watch import WriteWatch

READY_TIMEOUT_S = 300.0  # the imports, on a loaded machine
REQUEST_TIMEOUT_S = 30.0
RESET_TIMEOUT_S = 120.0
KILL_WAIT_S = 2.0  # for a SIGKILLed kernel to be collected; past it, jupyter_client's own wait goes on
GRADER_MODULES = ("autograder", "solutions")
# The zygote's own variables, beside the kernels' (each kernel's environment replaces them): debugpy,
# which it imports for ipykernel's debugger, then prints no warning about frozen modules on the
# grader's terminal (it changes nothing else)
ZYGOTE_ENVIRONMENT = {"PYDEVD_DISABLE_FILE_VALIDATION": "1"}


class ZygoteError(RuntimeError):
    """The zygote could not start, or stopped answering; the message says which and why."""


@dataclass(frozen=True)
class ZygoteSpec:
    """What a zygote is started with: the interpreter of the kernelspec, the hidden folders,
    the limits, and the kernels' environment (``kernel_environment``'s: modules read it when
    the zygote imports them), and the grader's cache of C++ builds that the sandbox binds
    read-only. A kernel whose spec differs gets a fresh zygote."""

    python: str
    hidden: tuple[str, ...]
    limits: Limits
    environment: frozenset[tuple[str, str]]
    cpp_cache: str = ""


@functools.cache
def preloaded_modules() -> list[str]:
    """What the zygote imports: ipykernel and IPython, every third-party module that a lesson's
    locked cells import (torch, matplotlib.pyplot, ...), and those of the course's own modules
    that every lesson imports, so that no kernel holds a module its lesson would not load; and
    what every kernel's start imports after the fork (ipykernel's debugger: debugpy; IPython's
    debugger and history: pdb, sqlite3), which took 0.09 s of CPU a kernel (141 modules; 8 now);
    and what torch imports on first use: ``torch._dynamo`` at a tensor's first operation on the
    meta device (the checks' "built on the device asked") and at an optimizer's first step
    (813 modules, sympy's among them: 0.9 s of a kernel in lessons 04, 10 and 12, 0.2–0.4 s in
    five more), ``torch.utils.benchmark`` where the course's timing is imported (32–42 modules)."""
    third_party: set[str] = set()
    ours: list[set[str]] = []
    for lesson in lessons.EXERCISES:
        if not lessons.source_path(lesson).exists():
            continue
        named = {module for node in grading.import_statements(lesson) for module in _modules_of(node)}
        course = {module for module in named if module.split(".")[0] in GRADER_MODULES}
        third_party |= named - course
        ours.append(course)
    common = set.intersection(*ours) if ours else set()
    first = ["ipykernel.kernelapp", "ipykernel.debugger", "IPython", "IPython.core.debugger", "sqlite3"]
    first += ["numpy", "torch", "matplotlib.pyplot", "torch._dynamo", "torch.utils.benchmark"]
    return list(dict.fromkeys([*first, *sorted(third_party | common)]))


def _modules_of(node: ast.Import | ast.ImportFrom) -> list[str]:
    """The modules an import statement names (``from torch import nn``: ``torch``)."""
    return [node.module] if isinstance(node, ast.ImportFrom) else [alias.name for alias in node.names]


class Home:
    """This process's folders that its zygotes share with their kernels, in Jupyter's runtime
    folder: ``run`` (a private folder per kernel) and ``slot`` (the working folder of the
    kernel being graded). Both are empty between notebooks."""

    def __init__(self):
        runtime = Path(jupyter_runtime_dir())
        runtime.mkdir(parents=True, exist_ok=True)
        self.root = Path(
            tempfile.mkdtemp(prefix="zygote-", dir=runtime)
        )  # short: a socket path fits in 108 bytes
        self.run = self.root / "run"
        self.slot = self.root / "slot"
        self.run.mkdir()
        self.slot.mkdir()
        for folder in (self.run, self.slot):
            give_to_sandbox(folder)

    def private_folder(self) -> Path:
        """A new folder for one kernel's connection file and sockets, the sandbox user's."""
        folder = Path(tempfile.mkdtemp(prefix="k-", dir=self.run))
        give_to_sandbox(folder)
        return folder

    def enter(self, folder: Path, hidden: tuple[str, ...]) -> Path:
        """Copy the notebook's ``folder`` into the slot, at its path below the hidden folder
        that holds it (its name alone when none does); return where the kernel finds it. Only
        its regular files and folders, none followed (autograder/engine/submission_files.py): the
        course's steps leave nothing else there, and anything else is left out."""
        base = next((Path(h) for h in hidden if folder.is_relative_to(h)), folder.parent)
        inside = self.slot / folder.relative_to(base)
        inside.mkdir(parents=True, exist_ok=True)
        submission_files.mirror(folder, inside, submission_files.UNCAPPED)
        return inside

    def empty(self, keep: Path | None = None) -> None:
        """Remove everything a kernel left in ``run`` and ``slot`` (but ``keep``)."""
        for folder in (self.run, self.slot):
            for entry in folder.iterdir():
                if entry != keep:
                    submission_files.remove(entry)

    def remove(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)


class Zygote:
    """The grader's handle on one zygote: its bwrap process, a pidfd of the zygote itself
    (process 1 of the sandbox), the command pipe (one JSON object a line each way, one request
    at a time), and the provisioner that holds it (``owner``; None while it is idle)."""

    def __init__(self, spec: ZygoteSpec, home: Home, spawner: ThreadPoolExecutor):
        self.spec = spec
        self.owner: weakref.ref | None = None
        self._buffer = b""
        self._lock = threading.Lock()
        # the zygote imports for seconds and serves for hours: no per-process limits on it; each
        # kernel sets the sandbox's rlimits() on itself (which no process in the sandbox can raise)
        self.sandbox = SandboxSpec(
            spec.limits,
            writable=(home.run, home.slot),
            hidden=tuple(Path(folder) for folder in spec.hidden),
            readable=tuple(needed()),
            private=tuple(private_roots()),
            shared=shared_folders(spec.cpp_cache),
            as_pid_1=True,
        )
        info, info_end = os.pipe()
        server = [spec.python, "-P", "-m", "autograder.engine.kernels.zygote_server"]
        # bwrap's --die-with-parent ends the sandbox when the thread that started it ends:
        # the spawner's one thread lives as long as this process
        try:
            launched = launch(
                self.sandbox,
                server,
                lambda command, **options: spawner.submit(subprocess.Popen, command, **options).result(),
                process_limits=False,
                info_fd=info_end,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                env={**dict(spec.environment), **ZYGOTE_ENVIRONMENT},
                cwd="/",
            )
        except BaseException:
            os.close(info)
            raise
        finally:
            os.close(info_end)
        self.process, self.group = launched.process, launched.group
        self.pidfd: int | None = None
        try:
            self.pidfd = os.pidfd_open(_child_pid(info))
        except (OSError, ZygoteError):
            self.close()
            raise
        fresh = [str(folder) for folder in self.sandbox.fresh_folders()]
        self._send({"preload": preloaded_modules(), "fresh": fresh})
        self._receive(READY_TIMEOUT_S)

    def _send(self, message: dict) -> None:
        try:
            self.process.stdin.write((json.dumps(message) + "\n").encode())
            self.process.stdin.flush()
        except OSError as error:
            self.close()
            raise ZygoteError(f"the zygote stopped reading its commands ({error})") from error

    def _receive(self, timeout_s: float) -> dict:
        """The zygote's next reply; ZygoteError (and the zygote ended) if none comes in time."""
        deadline = time.monotonic() + timeout_s
        stream = self.process.stdout.fileno()
        while b"\n" not in self._buffer:
            left = deadline - time.monotonic()
            ready = select.select([stream], [], [], left)[0] if left > 0 else []
            chunk = os.read(stream, 65536) if ready else b""
            if not chunk:
                self.close()
                why = (
                    f"exited ({self.process.returncode})" if ready else f"gave no answer in {timeout_s:.0f} s"
                )
                raise ZygoteError(f"the zygote {why}; its error, if any, is on stderr")
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        reply = json.loads(line)
        if "error" in reply:
            self.close()
            raise ZygoteError(f"the zygote failed: {reply['error']}")
        return reply

    def request(self, op: str, timeout_s: float = REQUEST_TIMEOUT_S, **fields: Any) -> dict:
        """Send one request and return the zygote's reply."""
        with self._lock:
            if self.pidfd is None:
                raise ZygoteError("the zygote has ended")
            self._send({"op": op, **fields})
            return self._receive(timeout_s)

    @property
    def alive(self) -> bool:
        return self.pidfd is not None and self.process.poll() is None

    def fork(self, argv: list[str], env: dict[str, str], cwd: Path) -> int:
        """A new kernel, ``ipykernel_launcher`` with ``argv``, under the sandbox's per-process
        limits; its pid in the sandbox."""
        env = {**kernel_environment(env, self.spec.cpp_cache), **self.sandbox.environment()}
        limits = self.sandbox.rlimits()
        return self.request("fork", argv=argv, env=env, cwd=str(cwd), limits=limits)["pid"]

    def reset(self) -> bool:
        """Kill the kernel and everything it started, and put the sandbox back as it started.
        Returns whether that worked; when it did not, the zygote is ended (and its sandbox)."""
        try:
            clean = self.request("reset", RESET_TIMEOUT_S)["clean"]
        except ZygoteError:
            return False
        if not clean:
            self.close()
        return clean

    def close(self) -> None:
        """End the zygote; when this returns, no process of its sandbox is left (the kernel
        ends every process of a namespace before its process 1 has exited)."""
        if self.pidfd is not None:
            try:
                signal.pidfd_send_signal(self.pidfd, signal.SIGKILL)
            except ProcessLookupError:
                pass  # it has exited already
            select.select([self.pidfd], [], [])  # readable once it has exited
            os.close(self.pidfd)
            self.pidfd = None
        elif self.process.poll() is None:
            self.process.kill()  # bwrap, before it started the zygote
        self.process.wait()
        for stream in (self.process.stdin, self.process.stdout):
            try:
                stream.close()
            except OSError:
                pass  # the pipe's other end is gone: nothing left to flush
        if self.group is not None:
            remove_group(self.group)
            self.group = None


def _child_pid(info: int) -> int:
    """The pid of bwrap's child (the zygote), from the JSON bwrap writes to ``--info-fd``."""
    with os.fdopen(info, "rb") as stream:
        data = stream.read()  # bwrap closes its end once written, or when it fails
    if not data:
        raise ZygoteError(f"bubblewrap could not start the zygote's sandbox: {sandbox_problem()}")
    return json.loads(data)["child-pid"]


def _reusable(zygote: Zygote, spec: ZygoteSpec) -> bool:
    """Whether ``zygote`` may fork the next kernel: alive, idle (not abandoned by a kernel that
    never finished) and started for ``spec``."""
    return zygote.alive and zygote.owner is None and zygote.spec == spec


class Zygotes:
    """This process's zygote (at most one), its ``Home`` and the thread that starts zygotes,
    made when first needed."""

    def __init__(self):
        self.zygote: Zygote | None = None
        self._home: Home | None = None
        self._spawner: ThreadPoolExecutor | None = None
        self.lock = threading.Lock()

    @property
    def home(self) -> Home:
        if self._home is None:
            self._home = Home()
        return self._home

    @property
    def spawner(self) -> ThreadPoolExecutor:
        if self._spawner is None:
            self._spawner = ThreadPoolExecutor(1, thread_name_prefix="zygote-spawner")
        return self._spawner

    def claim(self, spec: ZygoteSpec, owner: object) -> Zygote:
        """An idle zygote for ``spec``, started if needed, held for ``owner`` until ``release``."""
        with self.lock:
            if self.zygote is not None and self.zygote.owner is not None and self.zygote.owner() is not None:
                raise ZygoteError("a warm kernel is already running in this process: one at a time")
            if self.zygote is not None and not _reusable(self.zygote, spec):
                self.zygote.close()
                self.zygote = None
            if self.zygote is None:
                self.zygote = Zygote(spec, self.home, self.spawner)
            self.zygote.owner = weakref.ref(owner)
            return self.zygote

    def release(self, zygote: Zygote) -> None:
        """Reset ``zygote`` once its kernel is done; it stays for the next notebook if clean,
        and when it returns, no process of the notebook's runs any more."""
        if zygote.reset():
            zygote.owner = None
        elif self.zygote is zygote:
            self.zygote = None

    def shutdown(self) -> None:
        """End the zygote and remove the home folders."""
        with self.lock:
            if self.zygote is not None:
                self.zygote.close()
                self.zygote = None
            if self._home is not None:
                self._home.remove()
                self._home = None

    def forget(self) -> None:
        """In a forked copy of this process: the zygote and the folders are the parent's, and
        the spawner's thread was not copied."""
        self.zygote, self._home, self._spawner, self.lock = None, None, None, threading.Lock()


ZYGOTES = Zygotes()
os.register_at_fork(after_in_child=ZYGOTES.forget)
atexit.register(ZYGOTES.shutdown)
# multiprocessing's workers leave by os._exit, past atexit, after running these finalizers
multiprocessing.util.Finalize(None, ZYGOTES.shutdown, exitpriority=0)


def shutdown() -> None:
    """End this process's zygote (it also ends at exit)."""
    ZYGOTES.shutdown()


def kernel_arguments(command: list[str]) -> list[str]:
    """The arguments of ``python -m ipykernel_launcher ARGS``: the kernels a zygote can fork."""
    if command[1:3] != ["-m", "ipykernel_launcher"]:
        raise ZygoteError(f"a warm kernel is an ipykernel (python -m ipykernel_launcher ...), not {command}")
    return command[3:]


class ZygoteProvisioner(LocalProvisioner):
    """A LocalProvisioner whose kernel is forked by the process's zygote instead of started.

    LocalProvisioner prepares the connection file and the environment as for any local
    kernel; ``launch_kernel`` copies the notebook's folder into the slot and asks the zygote
    for a kernel; ``cleanup`` resets the zygote, copies the slot back and empties the home.
    """

    zygote: Zygote | None = None
    folder: Path | None = None  # the notebook's folder, on this side
    inside: Path | None = None  # its copy, where the kernel works
    exit_code: int | None = None
    waited = False
    group: Group | None = None  # the zygote's group, and its OOM kills when the kernel started
    oom_kills = 0
    watch: WriteWatch | None = None  # what the kernel's folders hold on disk while it runs
    claim_seconds = 0.0  # spent getting the zygote: its start, when this kernel needed a new one

    def hit_memory_cap(self) -> bool:
        """Whether the memory group's OOM killer ended a process of the sandbox since the kernel
        started (ask before the kernel is cleaned up); False where there is no memory group."""
        return self.group is not None and self.group.oom_kills() > self.oom_kills

    def hit_write_cap(self) -> bool:
        """Whether the kernel was ended for writing more than ``Limits.disk_mib`` to its folders."""
        return self.watch is not None and self.watch.passed

    def _end_kernel(self) -> None:
        """SIGKILL the kernel (the write watch's thread; the reset ends what it started)."""
        zygote = self.zygote
        if zygote is not None:
            try:
                zygote.request("signal", signum=signal.SIGKILL)
            except ZygoteError:
                pass  # the zygote ended, and the kernel with it

    @property
    def has_process(self) -> bool:
        return self.zygote is not None and not self.waited

    async def launch_kernel(self, cmd: list[str], **kwargs: Any) -> KernelConnectionInfo:
        manager = self.parent
        limits = manager.limits()
        environment = frozenset(kernel_environment(kwargs["env"], manager.cpp_cache).items())
        hidden = tuple(str(Path(folder).resolve()) for folder in manager.hidden)
        spec = ZygoteSpec(cmd[0], hidden, limits, environment, manager.cpp_cache)
        argv = kernel_arguments(cmd)
        began = time.perf_counter()
        self.zygote = ZYGOTES.claim(spec, owner=self)
        self.claim_seconds = time.perf_counter() - began
        self.exit_code, self.waited, self.inside = None, False, None
        try:
            ZYGOTES.home.empty(keep=manager.private)
            self.folder = self.cwd = Path(kwargs.get("cwd") or os.getcwd()).resolve()
            self.inside = ZYGOTES.home.enter(self.folder, hidden)
            give_to_sandbox(self.inside)
            self.group = self.zygote.group
            self.oom_kills = self.group.oom_kills() if self.group is not None else 0
            self.pid = self.zygote.fork(argv, kwargs["env"], self.inside)
            folders, cap = (self.inside, manager.private), limits.disk_mib * 2**20
            self.watch = WriteWatch(folders, cap, self._end_kernel).start()
        except BaseException:
            self.finish()
            raise
        return self.connection_info

    async def poll(self) -> int | None:
        if self.zygote is None or self.exit_code is not None:
            return 0 if self.exit_code is None else self.exit_code
        try:
            self.exit_code = self.zygote.request("poll")["exit"]
        except ZygoteError:
            self.exit_code = -signal.SIGKILL  # its sandbox ended with the zygote
        return self.exit_code

    async def wait(self) -> int | None:
        while (code := await self.poll()) is None:
            await asyncio.sleep(0.1)
        self.waited = True
        return code

    async def send_signal(self, signum: int) -> None:
        if await self.poll() is None:
            try:
                self.zygote.request("signal", signum=signum)
            except ZygoteError:
                pass  # the zygote ended, and the kernel with it

    async def kill(self, restart: bool = False) -> None:
        """SIGKILL the kernel and wait, a few milliseconds at a time, until the zygote has collected
        it: jupyter_client then finds it ended at its first look, instead of sleeping 0.1 s."""
        await self.send_signal(signal.SIGKILL)
        deadline = time.monotonic() + KILL_WAIT_S
        while await self.poll() is None and time.monotonic() < deadline:
            await asyncio.sleep(0.002)

    async def terminate(self, restart: bool = False) -> None:
        await self.send_signal(signal.SIGTERM)

    async def cleanup(self, restart: bool = False) -> None:
        """Once the kernel is done: no process of its left, its folder copied back, the home
        emptied. Runs once however often jupyter_client and nbclient call it."""
        await super().cleanup(restart=restart)
        self.finish()

    def finish(self) -> None:
        """Reset the zygote (no process of the kernel's is left after), copy the kernel's
        folder back (what autograder/engine/submission_files.py keeps of it; the lines of what not go
        to the manager's ``left_behind``) and empty the home; nothing when the kernel was
        finished already."""
        if self.watch is not None:
            self.watch.stop()
        if self.zygote is None:
            return
        zygote, self.zygote = self.zygote, None
        ZYGOTES.release(zygote)
        try:
            if self.inside is not None:
                caps = self.parent.limits().caps()
                self.parent.left_behind = submission_files.mirror(self.inside, self.folder, caps)
        finally:
            ZYGOTES.home.empty()


class WarmKernelManager(SandboxSettings):
    """A kernel manager whose kernels the process's zygote forks (``ZygoteProvisioner``),
    with the cold manager's settings and conventions: ``judge_folder`` is the kernel's private
    folder, which both sides reach, and interrupts go by message. Its client is ready as soon
    as the kernel answers (autograder/engine/kernels/ready_client.py)."""

    client_class = DottedObjectName(f"{ReadyKernelClient.__module__}.{ReadyKernelClient.__name__}")
    client_factory = Type(ReadyKernelClient, klass=AsyncKernelClient)

    def hit_memory_cap(self) -> bool:
        """Whether the memory cap ended a process of this kernel's sandbox (ZygoteProvisioner's)."""
        return isinstance(self.provisioner, ZygoteProvisioner) and self.provisioner.hit_memory_cap()

    def hit_write_cap(self) -> bool:
        """Whether the write cap ended this kernel (ZygoteProvisioner's)."""
        return isinstance(self.provisioner, ZygoteProvisioner) and self.provisioner.hit_write_cap()

    @property
    def zygote_seconds(self) -> float:
        """Seconds this kernel's start spent getting its zygote (starting one, when it needed a
        new one), for the execute step's record of where its time went."""
        return self.provisioner.claim_seconds if isinstance(self.provisioner, ZygoteProvisioner) else 0.0

    async def _async_pre_start_kernel(self, **kw):
        self.private = ZYGOTES.home.private_folder()
        self.transport = "ipc"
        self.ip = str(self.private / "ipc")
        self.connection_file = str(self.private / "kernel.json")
        self.judge_folder = self.private  # the judge's socket: the one folder both sides reach
        # a signal would need the zygote; an interrupt request on the control channel does not
        self.kernel_spec.interrupt_mode = "message"
        if self.provisioner is None:
            self.provisioner = ZygoteProvisioner(
                kernel_id=self.kernel_id, kernel_spec=self.kernel_spec, parent=self
            )
        command, kw = await super()._async_pre_start_kernel(**kw)
        give_to_sandbox(self.private)  # and the connection file, written now
        return command, kw


class WarmExecute(CourseExecute):
    """``CourseExecute`` with every kernel forked by the process's zygote (``WarmKernelManager``).

    Its kernel is killed once the last cell has run, not asked to shut down: the zygote's reset
    kills every process of the sandbox anyway, and a kernel asked to shut down first runs its
    own exit (and any exit handler the submission registered), which took 0.5 s a notebook."""

    shutdown_kernel = Enum(
        ["graceful", "immediate"], default_value="immediate", help="How the kernel ends after the last cell."
    ).tag(config=True)

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("kernel_manager_class", WarmKernelManager)
        super().__init__(*args, **kwargs)
