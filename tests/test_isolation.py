"""The kernel's view of the machine (autograder/engine/kernels/: sandbox, zygote, seccomp): for cold and
warm kernels alike, an allow-listed environment, a user of its own, no keyring, every limit
the instructor set, and a memory group that counts shared mappings.

Each attack runs once without the defence (it succeeds) and once with it (it fails).
"""

import errno
import os
import struct
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient
from nbclient.exceptions import DeadKernelError
from nbformat.v4 import new_code_cell, new_notebook
from traitlets.config import Config

from autograder.engine.kernels import sandbox, seccomp, zygote
from autograder.engine.kernels.sandbox import Limits, SandboxedKernelManager

MANAGERS = [SandboxedKernelManager, zygote.WarmKernelManager]
ROOT = os.geteuid() == 0
SECRET = "hunter2-course-isolation"
LIMITS = Limits(memory_gib=1.5, cpu_s=77, open_files=99, tasks=64)  # none of them the default

READ_BACK = """
import ctypes, os, resource
print(os.getuid(), sorted(name for name in os.environ if "PASSWORD" in name or name.startswith("COURSE_")))
try:
    open("/etc/shadow").read()
    print("read /etc/shadow")
except PermissionError:
    print("/etc/shadow denied")
except FileNotFoundError:
    print("/etc/shadow denied")  # no such file here: nothing to read either
print([resource.getrlimit(getattr(resource, f"RLIMIT_{name}")) for name in ("DATA", "CPU", "NOFILE")])
print([os.statvfs(path).f_blocks * os.statvfs(path).f_frsize for path in ("/tmp", "/dev/shm")])

def cap(controller, v1, v2):
    for line in open("/proc/self/cgroup").read().splitlines():
        number, controllers, path = line.split(":", 2)
        for file in (f"/sys/fs/cgroup/{controller}{path}/{v1}", f"/sys/fs/cgroup{path}/{v2}"):
            if (controller in controllers.split(",") or number == "0") and os.path.isfile(file):
                return open(file).read().strip()

print(cap("memory", "memory.limit_in_bytes", "memory.max"), cap("pids", "pids.max", "pids.max"))
libc = ctypes.CDLL(None, use_errno=True)
added = libc.syscall(ADD_KEY, b"user", b"course-isolation", b"answer", 6, -4)
print("add_key", "refused" if added < 0 and ctypes.get_errno() == 1 else f"gave {added}")
open("mine", "w").close()
"""
ADD_KEY = seccomp.ARCHITECTURES[os.uname().machine].keyring_calls[0]


@pytest.fixture(scope="module")
def workspace(tmp_path_factory):
    folder = tmp_path_factory.mktemp("isolation") / "workspace"
    folder.mkdir()
    yield folder
    zygote.shutdown()


def _client(
    manager: type, workspace: Path, student: str, sources: list[str], limits: Limits
) -> NotebookClient:
    folder = workspace / "autograded" / student / "01_embedding"
    folder.mkdir(parents=True, exist_ok=True)
    config = Config()
    settings = config.SandboxSettings  # the instructor's settings, one section for both managers
    settings.hidden = [str(workspace)]
    for name, value in vars(limits).items():
        setattr(settings, name, value)
    nb = new_notebook(cells=[new_code_cell(source) for source in sources])
    return NotebookClient(
        nb,
        kernel_manager_class=manager,
        config=config,
        kernel_name="python3",
        timeout=120,
        resources={"metadata": {"path": str(folder)}},
    )


def _printed(nb: nbformat.NotebookNode) -> list[str]:
    for cell in nb.cells:
        assert all(o.output_type != "error" for o in cell.outputs), cell.outputs
    return ["".join(o.get("text", "") for o in cell.outputs).strip() for cell in nb.cells]


# --- the environment ------------------------------------------------------------------------


def test_the_kernel_environment_is_an_allow_list():
    grader = {
        "PATH": "/usr/bin",
        "HOME": "/root",
        "LANG": "C.UTF-8",
        "LC_ALL": "C",
        "OMP_NUM_THREADS": "2",
        "MKL_NUM_THREADS": "2",
        "COURSE_DEVICE": "cpu",
        "COURSE_HIDDEN_SEED": "7",
        "NBGRADER_EXECUTION": "autograde",
        "JPY_SESSION_NAME": "x",
        "PGPASSWORD": "secret",
        "AWS_SECRET_ACCESS_KEY": "secret",
        "GITHUB_TOKEN": "secret",
        "SSH_AUTH_SOCK": "/run/agent",
        "PYTHONPATH": "/elsewhere",
        "LD_PRELOAD": "/evil.so",
    }
    kept = sandbox.kernel_environment(grader | {"COURSE_CPP_CACHE": "/shared/builds"})
    # neither secrets nor what changes how Python runs; lesson 12's C++ builds stay in the sandbox
    assert sorted(kept) == sorted([*list(grader)[:10], "COURSE_CPP_CACHE"])
    assert kept["COURSE_CPP_CACHE"] == "/tmp/course-cpp"


@pytest.mark.parametrize("manager", MANAGERS, ids=["cold", "warm"])
def test_a_password_in_the_graders_environment_never_reaches_a_kernel(manager, workspace, monkeypatch):
    monkeypatch.setenv("PGPASSWORD", SECRET)
    monkeypatch.setenv("COURSE_DEVICE", "cpu")
    cell = "import os\nprint(os.environ.get('PGPASSWORD'), os.environ.get('COURSE_DEVICE'))"
    for module in (sandbox, zygote):  # without the allow-list: the password is printed
        monkeypatch.setattr(module, "kernel_environment", lambda environment, *shared: dict(environment))
    client = _client(manager, workspace, "eve", [cell], Limits())
    assert _printed(client.execute()) == [f"{SECRET} cpu"]
    monkeypatch.undo()
    monkeypatch.setenv("PGPASSWORD", SECRET)
    monkeypatch.setenv("COURSE_DEVICE", "cpu")
    client = _client(manager, workspace, "eve", [cell], Limits())
    assert _printed(client.execute()) == ["None cpu"]


# --- every limit, read back from inside ------------------------------------------------------


@pytest.mark.parametrize("manager", MANAGERS, ids=["cold", "warm"])
def test_a_kernel_runs_as_its_own_user_with_every_limit_the_instructor_set(manager, workspace, monkeypatch):
    monkeypatch.setenv("COURSE_HIDDEN_SEED", "4242")
    monkeypatch.setenv("COURSE_DEVICE", "cpu")
    monkeypatch.setenv("PGPASSWORD", SECRET)
    client = _client(manager, workspace, "ada", [READ_BACK.replace("ADD_KEY", str(ADD_KEY))], LIMITS)
    identity, shadow, rlimits, scratch, groups, keyring = _printed(client.execute())[0].splitlines()
    user, environment = identity.split(" ", 1)
    assert int(user) == (sandbox.NOBODY if ROOT else os.geteuid())
    # the course's own (lesson 12's private build folder, the device, the seed), no password
    assert environment == "['COURSE_CPP_CACHE', 'COURSE_DEVICE', 'COURSE_HIDDEN_SEED']"
    if ROOT:  # as the grader's own user, a kernel reads what the grader reads but the hidden folders
        assert shadow == "/etc/shadow denied"
    memory = int(LIMITS.memory_gib * 2**30)
    assert rlimits == str([(memory, memory), (LIMITS.cpu_s, LIMITS.cpu_s), (LIMITS.open_files,) * 2])
    assert scratch == str([memory, memory])
    memory_group = sandbox.cgroup_root("memory") is not None
    tasks_group = sandbox.cgroup_root("pids") is not None
    expected_memory = str(sandbox.memory_cap(LIMITS)) if memory_group else "None"
    assert groups == f"{expected_memory} {LIMITS.tasks if tasks_group else None}"
    assert keyring == "add_key refused"
    # once the kernel has ended, what it wrote is the grader's: nothing kept stays writable by nobody
    assert (workspace / "autograded" / "ada" / "01_embedding" / "mine").stat().st_uid == os.geteuid()


def test_the_sandbox_runs_as_the_grader_in_a_user_namespace_when_the_grader_is_not_root(monkeypatch):
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    monkeypatch.setattr(os, "getegid", lambda: 1000)
    assert sandbox.sandbox_user() == (1000, 1000)
    command = sandbox.SandboxSpec(Limits()).command(["python"])
    assert "--unshare-user" in command and "setpriv" not in command and "--cap-add" not in command
    sandbox.give_to_sandbox(Path("/nonexistent"))  # nothing to give: the sandbox is the grader


# --- the keyring -----------------------------------------------------------------------------


def _run_sealed(code: str, keyring_filter: bool) -> str:
    """``code`` run by Python in a sandbox (with or without the keyring filter); its output."""
    fd = seccomp.filter_fd() if keyring_filter else None
    command = sandbox.SandboxSpec(
        Limits(), readable=sandbox.needed(), private=sandbox.private_roots()
    ).command([sys.executable, "-c", code], seccomp_fd=fd)
    try:
        done = subprocess.run(command, pass_fds=() if fd is None else (fd,), capture_output=True, text=True)
    finally:
        if fd is not None:
            os.close(fd)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


KEYCTL = seccomp.ARCHITECTURES[os.uname().machine].keyring_calls[2]
KEYRING = f"""
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
name, user_keyring = b"course-{os.getpid()}", -4  # KEY_SPEC_USER_KEYRING

def answer(result):
    return str(result) if result >= 0 else os.strerror(ctypes.get_errno())

def find():  # keyctl(KEYCTL_SEARCH, ...)
    return libc.syscall({KEYCTL}, 10, user_keyring, b"user", name, 0)
"""
ADD = (
    KEYRING
    + f"""added = libc.syscall({ADD_KEY}, b"user", name, b"my answer", 9, user_keyring)
if added >= 0:  # readable by the user's every process, not only by those that hold it
    libc.syscall({KEYCTL}, 5, added, 0x3F3F0000)  # KEYCTL_SETPERM
print(answer(added))
"""
)
READ = (
    KEYRING
    + f"""buffer = ctypes.create_string_buffer(64)
found = find()
length = libc.syscall({KEYCTL}, 11, found, buffer, 64) if found >= 0 else found
print(buffer.raw[:length].decode() if length >= 0 else answer(length))
"""
)  # KEYCTL_READ
FORGET = (
    KEYRING
    + f"""found = find()
print(answer(libc.syscall({KEYCTL}, 21, found) if found >= 0 else found))
"""
)  # KEYCTL_INVALIDATE


def test_no_key_passes_from_one_sandbox_to_the_next():
    # A user's keyring lasts while a process of that user does: a zygote, another worker's kernel
    keeper = subprocess.Popen(sandbox.SandboxSpec(Limits()).command(["sleep", "600"]))
    try:
        added = _run_sealed(ADD, keyring_filter=False)  # without the filter: a key in the user's keyring
        assert added.isdigit(), added
        if ROOT:  # every sandbox runs as nobody: a later one reads the key back
            assert _run_sealed(READ, keyring_filter=False) == "my answer"
        assert _run_sealed(FORGET, keyring_filter=False) == "0"
        assert _run_sealed(ADD, keyring_filter=True) == os.strerror(errno.EPERM)  # with it: refused
        assert _run_sealed(READ, keyring_filter=False) == os.strerror(errno.ENOKEY)  # and none was left
        assert _run_sealed(READ, keyring_filter=True) == os.strerror(errno.EPERM)
    finally:
        keeper.kill()
        keeper.wait()


def _judged(machine: str, nr: int, arch: int | None = None) -> int:
    """What ``seccomp.program(machine)`` returns for system call ``nr`` (a classic BPF run)."""
    code = seccomp.program(machine)
    data = struct.pack("=iI", nr, arch if arch is not None else seccomp.ARCHITECTURES[machine].audit)
    program = [struct.unpack("=HBBI", code[i : i + 8]) for i in range(0, len(code), 8)]
    pc, accumulator = 0, 0
    while True:
        op, jump_true, jump_false, value = program[pc]
        if op == seccomp.LOAD_WORD:
            accumulator = struct.unpack_from("=I", data, value)[0]
        elif op == seccomp.RETURN:
            return value
        elif op in (seccomp.JUMP_IF_EQUAL, seccomp.JUMP_IF_AT_LEAST):
            holds = accumulator == value if op == seccomp.JUMP_IF_EQUAL else accumulator >= value
            pc += jump_true if holds else jump_false
        else:
            raise AssertionError(f"unknown instruction {op:#x}")
        pc += 1


@pytest.mark.parametrize("machine", sorted(seccomp.ARCHITECTURES))
def test_the_filter_refuses_the_keyring_calls_and_foreign_numbers_only(machine):
    arch = seccomp.ARCHITECTURES[machine]
    for nr in arch.keyring_calls:
        assert _judged(machine, nr) == seccomp.REFUSE
    for nr in (0, 1, 39, 59, 56, 435, min(arch.keyring_calls) - 1, max(arch.keyring_calls) + 1):
        assert _judged(machine, nr) == seccomp.ALLOW
    assert _judged(machine, 0, arch=0x40000003) == seccomp.REFUSE  # i386's numbers
    if arch.foreign_from is not None:
        assert _judged(machine, arch.foreign_from + 1) == seccomp.REFUSE  # x32's read()


# --- memory that counts shared mappings -----------------------------------------------------

SHARED_HOG = """
import mmap
hoard = mmap.mmap(-1, 3 * 2**29)  # MAP_SHARED: RLIMIT_DATA does not count it; half again the cap
for offset in range(0, len(hoard), mmap.PAGESIZE):
    hoard[offset] = 1
print("held 1.5 GiB")
"""


@pytest.mark.parametrize("manager", MANAGERS, ids=["cold", "warm"])
def test_shared_memory_past_the_cap_ends_the_kernel_and_says_so(manager, workspace, monkeypatch):
    limits = Limits(memory_gib=1.0)
    monkeypatch.setattr(sandbox, "cgroup_root", lambda controller: None)  # no group: the hog holds 1.5 GiB
    data = "import resource\nprint(resource.getrlimit(resource.RLIMIT_DATA))"
    client = _client(manager, workspace, "hog", [SHARED_HOG, data], limits)
    assert _printed(client.execute()) == ["held 1.5 GiB", str((2**30, 2**30))]  # RLIMIT_DATA still holds
    monkeypatch.undo()
    zygote.shutdown()  # its zygote has no group: the next kernel gets a fresh one
    if sandbox.cgroup_root("memory") is None:
        pytest.skip("no memory cgroup can be made here: only RLIMIT_DATA and the scratch sizes hold")
    client = _client(manager, workspace, "hog", [SHARED_HOG], limits)
    with client.setup_kernel():
        with pytest.raises(DeadKernelError):
            client.execute_cell(client.nb.cells[0], 0)
        assert client.km.hit_memory_cap()
