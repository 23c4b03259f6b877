"""Hostile submissions, graded in one run between two honest students, with the sandbox on.

Each attacker hands in lesson 01 with the right solution and, at the top of its solution
cell, one attack (what a student on deadline night might try). For every attack: the honest
students' grades are what they would be without it, the submissions, the gradebook and the
repository are unchanged, nothing the attack started is still running, and what the attack
could see of the workspace is only its own folder.
"""

import hashlib
import re
import socket
import subprocess
import threading
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
    "tmp_writer": """
with open("/tmp/course-hostile-tmp-writer", "w") as handle:
    handle.write("left behind")
""",
}


# Whole solution cells that take a shortcut; the grader flags them (autograder/flags.py).
SHORTCUTS = {
    "copier": "from solutions.embedding import Embedding",
    "forger": """import math

from torch import nn

import autograder.checks.embedding
import autograder.hidden.embedding

autograder.checks.embedding.check_embedding_values = lambda cls: None
autograder.hidden.embedding.hidden_embedding = lambda cls: None


class Embedding(nn.Module):
    def __init__(self, vocab_size, d_model):
        super().__init__()
        self.lut = nn.Embedding(vocab_size, d_model)

    def forward(self, tokens):
        return self.lut(tokens)  # no sqrt(d_model): a wrong answer
""",
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


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
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
    for student, nb in notebooks.items():
        path = inbox / student / LESSON / lessons.notebook_name(LESSON)
        path.parent.mkdir(parents=True)
        nbformat.write(nb, path)
    repository = _digest(lessons.ROOT.glob("autograder/**/*.py"))
    pipeline = Pipeline(tmp / "workspace", release=tmp / "release", log=lambda *_: None)
    pipeline.release([LESSON])
    pipeline.collect_folder(inbox)
    submitted = _digest(pipeline.submitted.rglob("*"))
    pipeline.autograde()
    stop.set()
    return {
        "pipeline": pipeline,
        "repository": repository,
        "submitted": submitted,
        "received": received,
        "leftovers": _leftovers(),
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
    assert graded_folders == set(HONEST) | set(ATTACKS) | set(SHORTCUTS)


# An attack that raised in its solution cell left the class undefined, so its tests fail: it
# scores 0. One that ran without an error (in its own folder, or on nothing it could reach)
# keeps the points of its correct solution, and no more.
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
}


def test_each_attacker_gets_the_points_of_what_ran_and_no_more(graded):
    scores = graded["pipeline"].scores()
    assert {attack: scores[(attack, LESSON)][0] for attack in ATTACKS} == EARNED


def test_a_spy_sees_only_its_own_folder(graded):
    seen = _outputs(graded["pipeline"], "spy")
    assert "found: ['../../spy'] ['../../../autograded']" in seen, seen[:2000]
    for student in (*HONEST, "deleter"):
        assert student not in seen.replace("../../spy", "")


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


def test_shortcuts_are_flagged_to_the_instructor_by_cell_and_reason(graded):
    flagged = {(p.student, p.what) for p in graded["pipeline"].problems if p.what.startswith("flagged")}
    copier = "flagged, cell Embedding: imports solutions.embedding (the course's reference or grading code)"
    assert ("copier", copier) in flagged
    forger = {what for student, what in flagged if student == "forger"}
    assert (
        "flagged, cell Embedding: changes autograder.checks.embedding.check_embedding_values, "
        "an attribute of an imported module"
    ) in forger
    # the patcher named the checks' file; nobody else is flagged (no false alarm)
    assert {student for student, _ in flagged} == {"copier", "forger", "patcher"}


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
    suspected = [(p.student, p.what) for p in pipeline.problems if p.what.startswith("tampering suspected")]
    assert [student for student, _ in suspected] == ["forger"]
    what = suspected[0][1]
    assert what.startswith("tampering suspected, cell test_Embedding_values: passed in the notebook"), what
    assert "sqrt(d_model)" in what, what  # the judge's own message names the mistake
    assert "JudgeFailure" in _outputs(pipeline, "forger")  # and the feedback says why the points went
