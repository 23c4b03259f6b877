"""Hostile submissions that cost the grader time, disk or memory: every step that processes a
submission's output is bounded per submission (issue 31, Deliver 7).

Each attack is shown succeeding without its defence (the cap set off, or a stand-in that lacks
it) and then failing with it. The caps here are small (MiB and seconds, not the defaults' GiB),
so that each case runs in seconds.
"""

import ctypes
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from bs4 import BeautifulSoup
from nbclient import NotebookClient
from nbformat import NotebookNode
from nbformat.v4 import new_code_cell, new_notebook
from traitlets.config import Config

from autograder.engine import feedback_page
from autograder.engine.execute import GradingStopped
from autograder.engine.feedback_page import MATH_NOTICE_ID, MathCaps, Typesetter, offline_page
from autograder.engine.kernels import sandbox, zygote, zygote_server
from autograder.engine.kernels.sandbox import Limits, SandboxSpec, give_to_sandbox, needed, private_roots
from autograder.engine.limit_errors import limit_lines

# One formula that expands itself until MathJax's macro limit: 2 to 3 ms and 0.9 KiB of SVG each.
# 41,000 of them (580 KB of a submission's output) took 109 s here and made a 36.8 MiB page.
BOMB = "$\\def\\a{\\a}\\a$ "
HONEST = "$x^2 + \\frac{a}{b}$ "  # 3.6 KiB of SVG each
NO_CAPS = MathCaps(formulas=10**9, seconds=10**6, svg_mib=10**6, text_mib=10**6)
# A Node.js process that starts as typeset_math.cjs does, then never answers.
NEVER_ANSWERS = (
    "process.stdout.write(JSON.stringify({css: ''}) + '\\n');\nprocess.stdin.on('data', () => {});\n"
)


def _page(body: str) -> str:
    return f'<!DOCTYPE html>\n<html><head><meta charset="utf-8"></head><body>\n<p>{body}</p>\n</body></html>'


def _offline(page: str, caps: MathCaps) -> tuple[str, float]:
    """The page made offline by a typesetter of its own with ``caps``, and the seconds it took."""
    with Typesetter(caps) as typesetter:
        start = time.perf_counter()
        html = offline_page(page, typesetter)
        return html, time.perf_counter() - start


def _notice(html: str) -> str:
    soup = BeautifulSoup(html, "html.parser")
    notice = soup.find(id=MATH_NOTICE_ID)
    assert notice is not None and soup.body.find(True) is notice, "the notice comes first in the body"
    return notice.get_text()


def test_a_page_of_recursive_macros_is_shown_as_tex_and_says_why():
    page = _page(BOMB * 2100)
    uncapped, uncapped_s = _offline(page, NO_CAPS)
    assert uncapped.count("<svg") == 2100 and len(uncapped) > 1.5 * 2**20  # the attack: seconds, MiB
    capped, capped_s = _offline(page, MathCaps())
    assert "<svg" not in capped and len(capped) < len(page) + 50_000
    assert _notice(capped) == (
        "The formulas on this page are shown as their TeX source, not typeset: "
        "it holds 2,100 formulas, over the cap of 2,000."
    )
    assert capped.count(BOMB) == 2100  # the TeX, as the page's text
    assert capped_s < uncapped_s / 4, (capped_s, uncapped_s)


def test_typesetting_stops_at_the_time_cap():
    page = _page(BOMB * 600)  # under the cap on formulas
    uncapped, _ = _offline(page, MathCaps(seconds=10**6))
    assert uncapped.count("<svg") == 600
    capped, capped_s = _offline(page, MathCaps(seconds=0.3))
    assert "<svg" not in capped and capped_s < 3, capped_s
    assert _notice(capped).endswith("not typeset: typesetting them took more than 0.3 s.")


def test_typesetting_stops_at_the_size_cap():
    page = _page(HONEST * 400)  # 1.4 MiB typeset: a lesson's page holds up to 216 formulas, 0.6 MiB
    uncapped, _ = _offline(page, MathCaps())
    assert uncapped.count("<svg") == 400 and len(uncapped) > 2**20 and MATH_NOTICE_ID not in uncapped
    capped, _ = _offline(page, MathCaps(svg_mib=1))
    assert "<svg" not in capped and _notice(capped).endswith("typeset, they came to more than 1 MiB.")
    text, _ = _offline(page, MathCaps(text_mib=0.005))
    assert "<svg" not in text and _notice(text).endswith("to search, over the cap of 0.005 MiB.")


def _wait_for(typesetter: Typesetter, ended: list[BaseException]) -> None:
    try:
        offline_page(_page("$x$"), typesetter)
    except RuntimeError as error:
        ended.append(error)


def test_a_page_whose_typesetting_never_ends_costs_its_time_cap_and_the_next_page_is_typeset(
    tmp_path, monkeypatch
):
    script = feedback_page.SCRIPT
    stand_in = tmp_path / "never_answers.cjs"
    stand_in.write_text(NEVER_ANSWERS)
    monkeypatch.setattr(feedback_page, "SCRIPT", stand_in)
    # without the cap: the grader waits as long as the Node.js process does
    with Typesetter(NO_CAPS) as typesetter:
        ended: list[BaseException] = []
        waiting = threading.Thread(target=_wait_for, args=(typesetter, ended), daemon=True)
        waiting.start()
        waiting.join(timeout=3)
        assert waiting.is_alive()
        typesetter._process.kill()  # what lets the thread end, with the error of a stopped process
        waiting.join(timeout=30)
        assert "stopped" in str(ended[0])
    monkeypatch.setattr(feedback_page, "GRACE_S", 0.5)
    with Typesetter(MathCaps(seconds=0.5)) as typesetter:
        start = time.perf_counter()
        hung = offline_page(_page("$x$"), typesetter)
        assert time.perf_counter() - start < 5
        assert _notice(hung).endswith("typesetting them took more than 0.5 s.") and "<svg" not in hung
        assert not typesetter.running  # ended: its next page gets a new process
        monkeypatch.setattr(feedback_page, "SCRIPT", script)
        assert offline_page(_page("$y$"), typesetter).count("<svg") == 1
        assert typesetter.running


# --- what a running kernel writes, and what it holds --------------------------------------

LIMITS = Limits(memory_gib=1.0, file_mib=8, disk_mib=16)  # small caps: each case runs in seconds
WRITE_64_MIB = """
import errno, os
for path in ("big.bin", "/tmp/big.bin"):
    try:
        with open(path, "wb") as handle:
            for _ in range(64):
                handle.write(bytes(2**20))
        print(path, "wrote", os.path.getsize(path) // 2**20, "MiB")
    except OSError as error:
        print(path, errno.errorcode[error.errno], "at", os.path.getsize(path) // 2**20, "MiB")
"""


def test_a_process_in_the_sandbox_cannot_write_a_file_past_the_cap(tmp_path, monkeypatch):
    """A write past RLIMIT_FSIZE fails with EFBIG in the process (Python ignores SIGXFSZ,
    which would end it), and it goes on."""
    folder = tmp_path / "own"
    folder.mkdir()
    give_to_sandbox(folder)
    script = WRITE_64_MIB + "print('still running')\n"
    command = [sys.executable, "-c", script]
    without = {name: value for name, value in SandboxSpec(LIMITS).rlimits().items() if name != "RLIMIT_FSIZE"}
    monkeypatch.setattr(SandboxSpec, "rlimits", lambda self: without)  # a sandbox without the cap
    spec = SandboxSpec(LIMITS, writable=(folder,), readable=tuple(needed()), private=tuple(private_roots()))
    run = subprocess.run(spec.command(command), cwd=folder, capture_output=True, text=True, timeout=120)
    assert run.stdout.splitlines() == ["big.bin wrote 64 MiB", "/tmp/big.bin wrote 64 MiB", "still running"]
    monkeypatch.undo()
    run = subprocess.run(spec.command(command), cwd=folder, capture_output=True, text=True, timeout=120)
    assert run.stdout.splitlines() == [
        "big.bin EFBIG at 8 MiB",
        "/tmp/big.bin EFBIG at 8 MiB",
        "still running",
    ]


@pytest.fixture(scope="module")
def workspace(tmp_path_factory):
    folder = tmp_path_factory.mktemp("bounds") / "workspace"
    folder.mkdir()
    yield folder
    zygote.shutdown()


def _folder(workspace: Path, student: str) -> Path:
    folder = workspace / "autograded" / student / "01_embedding"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def _config(workspace: Path) -> Config:
    """The sandbox's settings: the workspace hidden, ``LIMITS``."""
    config = Config()
    config.SandboxSettings.hidden = [str(workspace)]
    for name, value in vars(LIMITS).items():
        setattr(config.SandboxSettings, name, value)
    return config


def _warm(workspace: Path, student: str, *sources: str) -> NotebookNode:
    """A notebook of ``sources`` run in a warm kernel under ``LIMITS``, errors kept in its outputs."""
    folder, config = _folder(workspace, student), _config(workspace)
    nb = new_notebook(cells=[new_code_cell(source) for source in sources])
    client = NotebookClient(
        nb,
        kernel_manager_class=zygote.WarmKernelManager,
        config=config,
        kernel_name="python3",
        timeout=120,
        allow_errors=True,
        resources={"metadata": {"path": str(folder)}},
    )
    return client.execute()


def _printed(nb: NotebookNode) -> list[str]:
    return ["".join(o.get("text", "") for o in cell.outputs).strip() for cell in nb.cells]


def test_a_warm_kernel_cannot_write_past_the_cap_and_the_report_says_so(workspace):
    nb = _warm(
        workspace, "writer", WRITE_64_MIB, "with open('big.bin', 'ab') as handle:\n    handle.write(b'x')"
    )
    assert _printed(nb)[0].splitlines() == ["big.bin EFBIG at 8 MiB", "/tmp/big.bin EFBIG at 8 MiB"]
    assert nb.cells[1].outputs[0].evalue == "[Errno 27] File too large"  # the kernel went on, and failed
    assert limit_lines(nb, LIMITS) == [
        "cell 2 (added by the learner) wrote a file up to the sandbox's cap of 8 MiB a file (--file-mib): "
        "it failed there"
    ]


def test_a_kernel_that_runs_out_of_memory_is_reported(workspace):
    """A solution that needs more than the cap fails in its cell, and says nothing on its own:
    no kernel died, no cell timed out, nothing was left behind. The report names the cap."""
    hog = "hoard = bytearray(2 * 2**30)"
    torch_hog = "import torch\nhoard = torch.empty(2**28, dtype=torch.float64)"
    nb = _warm(workspace, "hog", hog, torch_hog, "print('alive')")
    assert [cell.outputs[0].get("ename") for cell in nb.cells[:2]] == ["MemoryError", "RuntimeError"]
    assert _printed(nb)[2] == "alive"
    cap = "ran out of memory at the sandbox's cap of 1 GiB a process (--memory-gib): it failed there"
    assert limit_lines(nb, LIMITS) == [
        f"cell 1 (added by the learner) {cap}",
        f"cell 2 (added by the learner) {cap}",
    ]


IOPRIO_SET = {"x86_64": 251, "aarch64": 30}[os.uname().machine]
IOPRIO_GET = zygote_server.IOPRIO_GET[os.uname().machine]
IDLE_LEVEL_7 = (3 << 13) | 7  # IOPRIO_PRIO_VALUE(IOPRIO_CLASS_IDLE, 7)
SLOW_THE_NEXT = f"""
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
print(libc.syscall({IOPRIO_SET}, 1, 1, {IDLE_LEVEL_7}), libc.syscall({IOPRIO_GET}, 1, 1))
"""
MY_PRIORITIES = f"""
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
print(libc.syscall({IOPRIO_GET}, 1, 0), os.getpriority(os.PRIO_PROCESS, 0))
"""


def test_the_zygote_reset_notices_an_io_priority_a_kernel_set(monkeypatch):
    """In this process: a fingerprint without the I/O priority (the stand-in) misses the change."""
    libc = ctypes.CDLL(None, use_errno=True)
    before = zygote_server.io_priority()
    monkeypatch.setattr(zygote_server, "io_priority", lambda: 0)
    blind = zygote_server.fingerprint()
    try:
        assert libc.syscall(IOPRIO_SET, 1, 0, (2 << 13) | 7) == 0  # best effort, level 7: any user may
        assert zygote_server.fingerprint() == blind
        monkeypatch.undo()
        assert zygote_server.io_priority() == (2 << 13) | 7
    finally:
        libc.syscall(IOPRIO_SET, 1, 0, before)
    assert zygote_server.io_priority() == before


def test_a_kernel_that_lowers_the_zygotes_priorities_does_not_slow_the_next(workspace):
    assert _printed(_warm(workspace, "eve", SLOW_THE_NEXT)) == [f"0 {IDLE_LEVEL_7}"]  # the zygote's, changed
    first = zygote.ZYGOTES.zygote
    # as the grader's own process: its I/O class and its nice value (0, unless the grader was started niced)
    grader = f"{zygote_server.io_priority()} {os.getpriority(os.PRIO_PROCESS, 0)}"
    assert _printed(_warm(workspace, "bob", MY_PRIORITIES)) == [grader]
    assert zygote.ZYGOTES.zygote is not first  # eve's zygote was not clean: a fresh one forked bob's kernel


# 100 MiB into the kernel's folder, in files under the file cap, at about 30 MiB/s
WRITE_100_MIB = """
import os, time
os.mkdir("FOLDER")
for index in range(100):
    with open(f"FOLDER/{index:03d}.bin", "wb") as handle:
        handle.write(b"x" * 2**20)
    time.sleep(0.03)
print("wrote 100 MiB")
"""


class _NoWatch:
    """A stand-in for WriteWatch that watches nothing: the sandbox as it was before."""

    passed = False

    def __init__(self, *args: object) -> None:
        pass

    def start(self) -> "_NoWatch":
        return self

    def stop(self) -> None:
        pass


def _held_mib(folder: Path) -> float:
    return sum(path.stat().st_size for path in folder.rglob("*") if path.is_file()) / 2**20


@pytest.mark.parametrize("execute", [sandbox.SandboxedExecute, zygote.WarmExecute], ids=["cold", "warm"])
def test_a_kernel_that_fills_its_folder_is_ended_at_the_cap_and_reported(execute, workspace, monkeypatch):
    for module in (sandbox, zygote):  # the watch off, cold and warm
        monkeypatch.setattr(module, "WriteWatch", _NoWatch)
    folder = _folder(workspace, f"filler_{execute.__name__}")
    nb = new_notebook(cells=[new_code_cell(WRITE_100_MIB.replace("FOLDER", "many"))])
    resources = {"metadata": {"path": str(folder)}}
    executor = execute(config=_config(workspace), timeout=120, allow_errors=True)
    executed, _ = executor.preprocess(nb, resources)
    assert _printed(executed) == ["wrote 100 MiB"] and _held_mib(folder / "many") == 100
    monkeypatch.undo()
    nb = new_notebook(cells=[new_code_cell(WRITE_100_MIB.replace("FOLDER", "more"))])
    with pytest.raises(GradingStopped) as stopped:  # the same folder: its 100 MiB were there before
        execute(config=_config(workspace), timeout=120, allow_errors=True).preprocess(nb, resources)
    assert str(stopped.value) == (
        "the kernel exited while running cell 1 (added by the learner) "
        "(its folder passed the sandbox's cap of 16 MiB)"
    )
    assert _held_mib(folder / "more") < 16 + 8  # overshoot: at most one interval's writes
