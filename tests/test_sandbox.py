"""The sandbox as a value (``SandboxSpec``), the one way a process starts in it (``launch``), the
limits' crossing into the kernel managers' settings, and, without bubblewrap, the pipeline's
refusal to grade, saying why and how to grade anyway."""

import dataclasses
import os
import subprocess
import sys
from pathlib import Path

import pytest

from autograder.engine.kernels import sandbox, seccomp
from autograder.engine.kernels.limits import Limits
from autograder.engine.kernels.sandbox import SandboxedKernelManager, SandboxSpec
from autograder.engine.kernels.zygote import WarmKernelManager
from autograder.engine.nbgrader_config import sandboxed
from autograder.engine.pipeline import Pipeline, SandboxUnavailable

NO_BWRAP = str(Path(sys.executable).parent)  # a PATH with this environment's tools and no bwrap


def test_the_pipeline_refuses_to_grade_without_a_sandbox(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", NO_BWRAP)
    with pytest.raises(SandboxUnavailable, match=r"apt-get install bubblewrap.*pass --unsafe"):
        Pipeline(tmp_path / "workspace", release=tmp_path / "release")
    Pipeline(tmp_path / "workspace", release=tmp_path / "release", sandbox=None)  # --unsafe: allowed


def test_the_command_line_says_why_and_exits_2(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "autograder", "--workspace", str(tmp_path), "autograde"],
        env={**os.environ, "PATH": NO_BWRAP},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 2, result.stdout + result.stderr
    assert "bubblewrap (`bwrap`) is not installed" in result.stderr and "--unsafe" in result.stderr


def test_the_sandbox_hides_the_workspace_and_binds_back_only_the_writable_folders():
    command = SandboxSpec(Limits(cpu_s=7), writable=[Path("/w/a/x")], hidden=[Path("/w")]).command(["python"])
    assert command.index("--tmpfs") < command.index("/w") < command.index("--bind")
    assert command[command.index("--bind") : command.index("--bind") + 3] == ["--bind", "/w/a/x", "/w/a/x"]
    assert "--unshare-net" in command and "--unshare-pid" in command and "--die-with-parent" in command
    assert "--cpu=7" in command and command[-1] == "python"


def test_what_the_kernel_needs_stays_readable_under_a_private_tmp():
    command = SandboxSpec(
        Limits(),
        writable=[Path("/tmp/repo/workspace/autograded/ada/01")],
        hidden=[Path("/tmp/repo/workspace")],
        readable=[Path("/tmp/repo"), Path("/opt/python")],
    ).command(["python"])
    mounts = " ".join(command[: command.index("--unshare-net")])
    assert mounts.index("--tmpfs /tmp ") < mounts.index("--ro-bind /tmp/repo /tmp/repo")
    assert mounts.index("--ro-bind /tmp/repo /tmp/repo") < mounts.index("--tmpfs /tmp/repo/workspace")
    assert "/opt/python" not in mounts  # outside /tmp: already readable through the read-only root


def test_home_folders_are_private_but_for_what_the_kernel_needs():
    command = SandboxSpec(
        Limits(),
        writable=[Path("/root/course/workspace/autograded/ada/01")],
        hidden=[Path("/root/course/workspace")],
        readable=[Path("/root/.pyenv/versions/3.11"), Path("/opt/python")],
        private=[Path("/tmp"), Path("/root")],
    ).command(["python"])
    mounts = " ".join(command[: command.index("--unshare-net")])
    assert mounts.index("--tmpfs /root ") < mounts.index("--ro-bind /root/.pyenv/versions/3.11")
    assert mounts.index("--tmpfs /root/course/workspace") < mounts.index(
        "--bind /root/course/workspace/autograded"
    )
    assert "/opt/python" not in mounts


def test_a_sandboxed_process_has_no_capabilities_even_when_root_starts_it():
    command = SandboxSpec(Limits()).command(["cat", "/proc/self/status"])
    status = subprocess.run(command, capture_output=True, text=True, check=True, timeout=60).stdout
    effective = next(line for line in status.splitlines() if line.startswith("CapEff:"))
    assert effective.split()[1] == "0000000000000000", (
        f"the sandboxed process keeps capabilities: {effective}"
    )


def test_scratch_folders_are_capped_and_folders_made_for_binds_are_open_to_the_sandbox_user():
    command = SandboxSpec(
        Limits(memory_gib=0.5),
        writable=[Path("/root/w/autograded/ada/01")],
        hidden=[Path("/root/w")],
        readable=[Path("/root/.pyenv/versions/3.11")],
        private=[Path("/tmp"), Path("/root")],
    ).command(["python"])
    mounts = " ".join(command[: command.index("--unshare-net")])
    half = str(2**29)
    assert f"--perms 1777 --size {half} --tmpfs /tmp " in mounts
    assert f"--dev /dev --perms 1777 --size {half} --tmpfs /dev/shm " in mounts
    assert "--perms 1777 --size 67108864 --tmpfs /root " in mounts  # a home folder: small
    assert "--perms 0755 --dir /root/.pyenv --perms 0755 --dir /root/.pyenv/versions --ro-bind" in mounts
    assert "--perms 0755 --dir /root/w/autograded --perms 0755 --dir /root/w/autograded/ada --bind" in mounts


def test_started_by_root_the_sandbox_becomes_nobody_with_no_capability_and_the_keyring_filter():
    command = SandboxSpec(Limits()).command(["python"], seccomp_fd=7)
    assert command[command.index("--seccomp") + 1] == "7"
    inner = command[command.index("--") + 1 :]
    if os.geteuid() == 0:
        assert inner[:4] == ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
        assert "--bounding-set=-all" in inner and "--unshare-user" not in command
    else:
        assert inner[0] == "prlimit" and "--unshare-user" in command


def test_one_specification_gives_the_zygote_its_command_fresh_folders_and_kernel_settings():
    """The zygote's sandbox is the cold kernel's specification with ``as_pid_1``: what it empties
    between kernels and what its kernels get come from the value, not from its command line."""
    limits = Limits(memory_gib=0.5, cpu_s=9, open_files=77, file_mib=5)
    cold = SandboxSpec(limits, writable=(Path("/w/a/x"),), hidden=(Path("/w"),), private=(Path("/tmp"),))
    warm = SandboxSpec(limits, writable=(Path("/w/a/x"),), hidden=(Path("/w"),), as_pid_1=True)
    assert cold.fresh_folders() == [Path("/dev"), Path("/dev/shm"), Path("/tmp"), Path("/w")]
    assert warm.fresh_folders() == [
        Path("/dev"),
        Path("/dev/shm"),
        Path("/dev/mqueue"),
        Path("/tmp"),
        Path("/w"),
    ]
    assert warm.rlimits() == {
        "RLIMIT_DATA": 2**29,
        "RLIMIT_CPU": 9,
        "RLIMIT_NOFILE": 77,
        "RLIMIT_FSIZE": 5 * 2**20,
    }
    started = warm.command(["server"], process_limits=False, info_fd=5)
    assert "--as-pid-1" in started and "--as-pid-1" not in cold.command(["python"])
    assert started[started.index("--info-fd") + 1] == "5" and "prlimit" not in started
    assert {"--cpu=9", "--nofile=77", f"--data={2**29}", f"--fsize={5 * 2**20}"} <= set(
        cold.command(["python"])
    )
    for name, value in warm.environment().items():
        at = started.index(name)
        assert started[at - 1 : at + 2] == ["--setenv", name, value]


@pytest.mark.parametrize("field", dataclasses.fields(Limits), ids=lambda field: field.name)
def test_every_limit_reaches_both_kernel_managers_and_comes_back_unchanged(field, tmp_path):
    """One field at a time set to a value that is not its default, so that a field the conversion
    leaves out comes back as its default and fails here."""
    default = getattr(Limits(), field.name)
    assert type(default) in (int, float), f"give this test a value of {field.type} for {field.name}"
    limits = dataclasses.replace(Limits(), **{field.name: default * 2 + 1})
    for manager in (SandboxedKernelManager, WarmKernelManager):
        assert manager().limits() == Limits()  # each trait's default is its field's
        assert manager(config=limits.to_config()).limits() == limits
        assert manager(config=sandboxed(tmp_path, limits)).limits() == limits  # nbgrader's config


def _recording_filters(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The descriptors of the keyring filters ``launch`` makes from now on."""
    made: list[int] = []
    make = seccomp.filter_fd

    def recorded() -> int:
        made.append(make())
        return made[-1]

    monkeypatch.setattr(seccomp, "filter_fd", recorded)
    return made


def _closed(fd: int) -> bool:
    try:
        os.fstat(fd)
    except OSError:
        return True
    return False


def test_launch_starts_the_process_under_the_keyring_filter_in_a_group_of_its_own(monkeypatch):
    filters = _recording_filters(monkeypatch)
    spec = SandboxSpec(Limits(), readable=tuple(sandbox.needed()), private=tuple(sandbox.private_roots()))
    launched = sandbox.launch(
        spec, ["cat", "/proc/self/status", "/proc/self/cgroup"], stdout=subprocess.PIPE, text=True
    )
    printed, _ = launched.process.communicate(timeout=60)
    assert launched.process.returncode == 0 and _closed(filters[0])  # bwrap had its own copy
    assert "Seccomp:\t2" in printed  # a filter is loaded (mode 2): the keyring filter
    if sandbox.cgroup_root("pids") is None:
        assert launched.group is None
        return
    assert f"{launched.group.folders['pids'].name}" in printed  # counted from its start
    sandbox.remove_group(launched.group)
    assert not any(folder.exists() for folder in launched.group.distinct())


def test_a_launch_that_cannot_start_leaves_no_descriptor_and_no_group_behind(monkeypatch):
    filters = _recording_filters(monkeypatch)
    groups: list[sandbox.Group | None] = []
    make_group = sandbox.sandbox_group

    def recorded(limits: Limits) -> sandbox.Group | None:
        groups.append(make_group(limits))
        return groups[-1]

    monkeypatch.setattr(sandbox, "sandbox_group", recorded)

    def refuse(command: list[str], **options: object) -> subprocess.Popen:
        assert filters[0] in options["pass_fds"] and command[-1] == "true"
        raise FileNotFoundError("bwrap")

    with pytest.raises(FileNotFoundError, match="bwrap"):
        sandbox.launch(SandboxSpec(Limits()), ["true"], refuse)
    assert _closed(filters[0]) and len(groups) == 1
    if groups[0] is not None:
        assert not any(folder.exists() for folder in groups[0].distinct())
