"""The committed notebook outputs hold on CPUs other than the one that wrote them.

PyTorch picks its CPU kernels by the instruction sets of the machine (AVX-512, AVX2, or
the portable "default" path), and the kernels round differently. `make test` runs nbval
on every source notebook with the machine's own kernels (the `--nbval` run), and this
test runs it again with the portable kernels forced, so an output that depends on the
kernels (a float tie, a last digit) fails on the machine that writes it, not on a
learner's or a CI runner's.

A notebook proven portable stays proven while nothing that makes its outputs changes: its
own text and outputs, the code it imports (the reference package, the checks, the hidden
tests, the timing and capstone helpers), the sanitiser nbval reads, and the versions of
PyTorch and Python. ``PROVEN`` records, per notebook, the fingerprint of all of these at
its last proof; this test runs nbval with the portable kernels on the notebooks whose
fingerprint differs (all of them on a fresh machine with another PyTorch), records the
new fingerprints when they pass, and asserts that every notebook's fingerprint is recorded.
Commit the record with the notebooks it proves.
"""

import hashlib
import json
import os
import platform
import re
import subprocess
import sys
from pathlib import Path

import torch

from autograder import lessons

FORCED = "default"
PROVEN = Path(__file__).with_name("portable_proven.json")
# what a lesson's outputs are made of, besides the notebook itself
INPUTS = [
    "solutions/*.py",
    "autograder/checks/*.py",
    "autograder/checks/catalogue/*.toml",
    "autograder/hidden/*.py",
    "autograder/timing.py",
    "autograder/capstone.py",
    "autograder/libtorch.py",
    "autograder/lessons.py",
    "autograder/grading.py",
    "tests/nbval_sanitize.cfg",
    "requirements.txt",
]


def _shared_inputs() -> str:
    digest = hashlib.sha256(f"torch {torch.__version__} python {platform.python_version()}".encode())
    for pattern in INPUTS:
        for path in sorted(lessons.ROOT.glob(pattern)):
            digest.update(str(path.relative_to(lessons.ROOT)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def fingerprint(notebook: Path, shared: str) -> str:
    """What the notebook's committed outputs were proven with: its bytes and the shared inputs."""
    return hashlib.sha256(shared.encode() + notebook.read_bytes()).hexdigest()


def _key(notebook: Path) -> str:
    return str(notebook.relative_to(lessons.ROOT))


def _run_portable(notebooks: list[Path]) -> subprocess.CompletedProcess:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "--nbval",
            "--nbval-sanitize-with",
            str(lessons.ROOT / "tests" / "nbval_sanitize.cfg"),
            *map(str, notebooks),
        ],
        cwd=lessons.ROOT,
        env={**os.environ, "ATEN_CPU_CAPABILITY": FORCED},
        capture_output=True,
        text=True,
        timeout=1200,
    )


def test_nbval_passes_with_the_portable_cpu_kernels():
    shared = _shared_inputs()
    notebooks = [lessons.source_path(lesson) for lesson in lessons.written_lessons()]
    proven = json.loads(PROVEN.read_text()) if PROVEN.exists() else {}
    current = {_key(nb): fingerprint(nb, shared) for nb in notebooks}
    stale = [nb for nb in notebooks if proven.get(_key(nb)) != current[_key(nb)]]
    print(f"{len(stale)} of {len(notebooks)} notebooks changed since their last proof, proven again")
    if stale:
        result = _run_portable(stale)
        assert result.returncode == 0, (
            f"with ATEN_CPU_CAPABILITY={FORCED}, an output depends on the CPU's kernels. Print a rounded "
            f"or a stable quantity instead.\n{result.stdout[-6000:]}"
        )
        summary = result.stdout.strip().splitlines()[-1]
        cells = re.fullmatch(r"(\d+) passed in .*", summary)  # nothing skipped, nothing failed
        assert cells and int(cells[1]) >= 10 * len(stale), summary
        PROVEN.write_text(json.dumps(current, indent=1, sort_keys=True) + "\n")
    assert json.loads(PROVEN.read_text()) == current


def test_a_change_to_a_notebook_or_to_what_it_imports_needs_a_new_proof(tmp_path, monkeypatch):
    notebook = tmp_path / "lesson.ipynb"
    notebook.write_text('{"cells": []}')
    before = fingerprint(notebook, _shared_inputs())
    notebook.write_text('{"cells": [1]}')
    assert fingerprint(notebook, _shared_inputs()) != before
    notebook.write_text('{"cells": []}')
    assert fingerprint(notebook, _shared_inputs()) == before
    monkeypatch.setattr(torch, "__version__", "0.0.0")  # another PyTorch: every proof is stale
    assert fingerprint(notebook, _shared_inputs()) != before


def test_the_proof_fails_on_an_output_that_the_cell_does_not_print(tmp_path):
    """The proof can fail: a committed output that differs from what the cell prints, as a last
    digit does under other kernels."""
    from nbformat.v4 import new_code_cell, new_notebook, new_output

    cell = new_code_cell("print(0.1 + 0.2)", outputs=[new_output("stream", name="stdout", text="0.3\n")])
    path = tmp_path / "drifting.ipynb"
    path.write_text(
        json.dumps(
            new_notebook(
                cells=[cell], metadata={"kernelspec": {"name": "python3", "display_name": "Python 3"}}
            )
        )
    )
    result = _run_portable([path])
    assert result.returncode != 0 and "FAILED ::Cell 0" in result.stdout, result.stdout
