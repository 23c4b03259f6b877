"""Warm kernels (autograder/engine/kernels/zygote.py): forked by one zygote per process, each as isolated from
the others as a cold sandboxed kernel, and with the lessons' imports already done.

The notebooks run through nbclient with ``WarmKernelManager``, as nbgrader runs them; the
kernels' folders lie in a workspace laid out as nbgrader's (autograded/<student>/<lesson>).
"""

import os
import select
import signal
import subprocess
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient
from nbclient.exceptions import DeadKernelError
from nbclient.util import run_sync
from nbformat.v4 import new_code_cell, new_notebook
from traitlets.config import Config

from autograder.authoring.samples import filled
from autograder.engine.judge import JUDGE_METADATA
from autograder.engine.kernels import zygote

LESSON = "01_embedding"
MARKER = "4243.4243"  # the command line of the process a kernel leaves behind
WARM = ("torch", "matplotlib.pyplot", "autograder.checks")  # imported before the kernel's first cell
LEFT_FILES = ["/tmp/left", "/dev/shm/left", "/dev/left", os.path.expanduser("~/left"), "left", "link"]

LEAVE_EVERYTHING = f"""
import ctypes, os, subprocess, torch
for path in {LEFT_FILES[:-1]!r}:
    try:
        with open(path, "w") as handle:
            handle.write("left by ada")
    except PermissionError:  # /dev is root's: a kernel run as nobody cannot write there
        assert path == "/dev/left" and os.getuid() != 0
os.symlink("/etc/hostname", "link")
torch.leak = 1
subprocess.Popen(["sleep", "{MARKER}"], start_new_session=True)
libc = ctypes.CDLL(None, use_errno=True)
print(libc.shmget(4243, 4096, 0o1600) >= 0, libc.mq_open(b"/left", os.O_CREAT | os.O_RDWR, 0o600, None) >= 0)
"""
FIND_ANYTHING = f"""
import ctypes, glob, os, sys, torch
print([path for path in {LEFT_FILES!r} if os.path.lexists(path)], hasattr(torch, "leak"))
commands = []
for pid in filter(str.isdigit, os.listdir("/proc")):
    try:
        commands.append(open(f"/proc/{{pid}}/cmdline").read())
    except OSError:
        pass  # ended meanwhile
print([command for command in commands if "{MARKER}" in command])
libc = ctypes.CDLL(None, use_errno=True)
print(libc.shmget(4243, 0, 0), libc.mq_open(b"/left", os.O_RDWR), os.listdir("/dev/mqueue"))
print(sorted(glob.glob("../../*")), sorted(glob.glob("../../../*")))
print(len(os.listdir(os.path.dirname(os.path.dirname(sys.argv[sys.argv.index("-f") + 1])))))
"""


@pytest.fixture(scope="module")
def workspace(tmp_path_factory):
    folder = tmp_path_factory.mktemp("warm") / "workspace"
    folder.mkdir()
    yield folder
    zygote.shutdown()


def _settings(workspace: Path, **limits) -> Config:
    config = Config()
    config.WarmKernelManager.hidden = [str(workspace)]
    for name, value in limits.items():
        setattr(config.WarmKernelManager, name, value)
    return config


def _folder(workspace: Path, student: str) -> Path:
    folder = workspace / "autograded" / student / LESSON
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def _run(folder: Path, *sources: str, config: Config, **hooks) -> nbformat.NotebookNode:
    """A notebook of ``sources`` run in a warm kernel working in ``folder``."""
    nb = new_notebook(cells=[new_code_cell(source) for source in sources])
    client = NotebookClient(
        nb,
        kernel_manager_class=zygote.WarmKernelManager,
        config=config,
        kernel_name="python3",
        timeout=60,
        resources={"metadata": {"path": str(folder)}},
        **hooks,
    )
    client.execute()
    return nb


def _printed(nb: nbformat.NotebookNode) -> list[str]:
    """What each cell printed; every cell ran without an error or a word on stderr."""
    for cell in nb.cells:
        assert all(o.output_type != "error" and o.get("name") != "stderr" for o in cell.outputs), cell.outputs
    return ["".join(o.get("text", "") for o in cell.outputs).strip() for cell in nb.cells]


def test_a_warm_kernel_runs_cells_with_the_imports_done_and_nothing_on_stderr(workspace):
    nb = _run(
        _folder(workspace, "ada"),
        f"import sys\nprint(all(m in sys.modules for m in {WARM!r}))",
        "import torch\nanswer = int(torch.tensor(6) * 7)",
        "print(answer)",
        "import matplotlib.pyplot as plt\nplt.plot([1, 2, 3]);",
        config=_settings(workspace),
    )
    assert _printed(nb)[:3] == ["True", "", "42"]
    assert "image/png" in nb.cells[3].outputs[0].data  # the inline backend, as in a cold kernel


FIRST_USE = """
import sys, torch
before = set(sys.modules)
torch.ones(3, 3, device="meta").tril()  # the checks' "built on the device asked"
weight = torch.ones(2, requires_grad=True)
weight.sum().backward()
torch.optim.Adam([weight]).step()
print(len(set(sys.modules) - before), "torch._dynamo" in set(sys.modules) - before)
"""


def test_what_torch_imports_at_first_use_is_imported_before_the_first_cell(workspace):
    """A meta tensor's first operation and an optimizer's first step import torch._dynamo (813
    modules, 0.9 s a kernel) unless the zygote did: here only a handful of modules are new."""
    (printed,) = _printed(_run(_folder(workspace, "cy"), FIRST_USE, config=_settings(workspace)))
    count, dynamo = printed.split()
    assert dynamo == "False" and int(count) < 20, printed


def test_a_kernel_leaves_nothing_for_the_next_and_sees_only_its_own_folder(workspace):
    config = _settings(workspace)
    ada, bob = _folder(workspace, "ada"), _folder(workspace, "bob")
    (bob / "data.txt").write_text("bob's own")
    assert _printed(_run(ada, LEAVE_EVERYTHING, config=config)) == ["True True"]
    first = zygote.ZYGOTES.zygote
    found = _printed(_run(bob, "import sys\nprint('torch' in sys.modules)", FIND_ANYTHING, config=config))
    assert zygote.ZYGOTES.zygote is first  # the same zygote forked both kernels
    assert found[0] == "True"
    assert found[1].splitlines() == [
        "[] False",  # no file in /tmp, /dev/shm, /dev, the home folder or its folder; torch untouched
        "[]",  # no process of ada's
        "-1 -1 []",  # no System V shared memory, no POSIX message queue
        "['../../bob'] ['../../../autograded']",  # only its own folder of the workspace
        "1",  # only its own private folder (connection file, sockets)
    ]
    assert (ada / "left").read_text() == "left by ada"  # what a kernel writes in its folder comes back
    assert not os.path.lexists(ada / "link")  # but not a link (autograder/engine/submission_files.py)
    assert sorted(path.name for path in bob.iterdir()) == ["data.txt"]
    ps = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True, check=True).stdout
    assert MARKER not in ps


HARM_THE_ZYGOTE = """
import os, resource, signal, time
for signum in (signal.SIGKILL, signal.SIGSTOP, signal.SIGTERM, signal.SIGINT):
    os.kill(os.getppid(), signum)
time.sleep(0.2)
state = [line for line in open("/proc/1/status") if line.startswith("State")][0].split()[1]
try:
    open("/proc/1/mem", "rb").read(1)
    print("read the zygote's memory")
except PermissionError:
    print("zygote", "stopped" if state == "T" else "not stopped", "unreadable")
resource.prlimit(1, resource.RLIMIT_NOFILE, (64, 64))  # passed on to the next kernel, unless replaced
"""


def test_a_kernel_that_harms_the_zygote_costs_only_itself(workspace):
    config = _settings(workspace)
    assert _printed(_run(_folder(workspace, "eve"), HARM_THE_ZYGOTE, config=config)) == [
        "zygote not stopped unreadable"
    ]
    nb = _run(
        _folder(workspace, "bob"),
        "import resource\nprint(resource.getrlimit(resource.RLIMIT_NOFILE))",
        config=config,
    )
    assert _printed(nb) == ["(1024, 1024)"]


def test_when_the_zygote_dies_the_next_notebook_gets_a_fresh_one(workspace):
    config = _settings(workspace)
    leave = "import torch\ntorch.leak = 1\nopen('/tmp/left', 'w').close()"

    def kill_the_zygote(cell, **_):
        if cell.source == leave:
            pidfd = zygote.ZYGOTES.zygote.pidfd
            signal.pidfd_send_signal(pidfd, signal.SIGKILL)
            select.select([pidfd], [], [])  # until it has ended, and its sandbox with it

    with pytest.raises(DeadKernelError):
        _run(_folder(workspace, "eve"), leave, "after = 1", config=config, on_cell_executed=kill_the_zygote)
    find = "import os, torch\nprint(os.path.exists('/tmp/left'), hasattr(torch, 'leak'))"
    assert _printed(_run(_folder(workspace, "bob"), find, config=config)) == ["False False"]


def test_a_killed_warm_kernel_is_collected_before_the_kill_returns(workspace):
    """jupyter_client then finds it ended at its first look, where it would sleep 0.1 s."""
    client = NotebookClient(
        new_notebook(),
        kernel_manager_class=zygote.WarmKernelManager,
        config=_settings(workspace),
        kernel_name="python3",
        resources={"metadata": {"path": str(_folder(workspace, "ada"))}},
    )
    with client.setup_kernel():
        provisioner = client.km.provisioner
        run_sync(provisioner.kill)()
        assert run_sync(provisioner.poll)() == -signal.SIGKILL


def test_a_warm_kernel_keeps_its_memory_and_cpu_limits(workspace):
    config = _settings(workspace, memory_gib=1.0, cpu_s=3)
    printed = []

    def keep(cell, **_):
        printed.append("".join(o.get("text", "") for o in cell.outputs))

    hog = "try:\n    hoard = bytearray(2 * 2**30)\nexcept MemoryError:\n    print('MemoryError')"
    with pytest.raises(DeadKernelError):  # SIGKILL at 3 s of CPU time
        _run(_folder(workspace, "hog"), hog, "while True:\n    pass", config=config, on_cell_executed=keep)
    assert printed[0] == "MemoryError\n"


def test_the_judge_reaches_a_warm_kernel(workspace):
    folder = _folder(workspace, "ada")
    nb = filled(LESSON)
    config = _settings(workspace)
    resources = {"nbgrader": {"assignment": LESSON}, "metadata": {"path": str(folder)}}
    nb, _ = zygote.WarmExecute(config=config, timeout=60).preprocess(nb, resources)
    graded = [cell for cell in nb.cells if cell.metadata.get("nbgrader", {}).get("grade")]
    outputs = [output for cell in graded for output in cell.outputs]
    assert graded and all(o.output_type != "error" and o.get("name") != "stderr" for o in outputs), outputs
    # the judge ran every passing test cell against the kernel, through its socket in judge_folder
    assert nb.metadata[JUDGE_METADATA]["overruled"] == {}
