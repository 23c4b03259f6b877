"""The committed notebook outputs hold on CPUs other than the one that wrote them.

PyTorch picks its CPU kernels by the instruction sets of the machine (AVX-512, AVX2, or
the portable "default" path), and the kernels round differently. `make test` runs nbval
on every source notebook with the machine's own kernels (the `--nbval` run), and this
test runs it again with the portable kernels forced, so an output that depends on the
kernels (a float tie, a last digit) fails on the machine that writes it, not on a
learner's or a CI runner's.
"""

import os
import subprocess
import sys

import pytest

from autograder import lessons

FORCED = "default"


@pytest.mark.parametrize("lesson", lessons.written_lessons())
def test_nbval_passes_with_the_portable_cpu_kernels(lesson):
    result = subprocess.run(
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
            str(lessons.source_path(lesson)),
        ],
        cwd=lessons.ROOT,
        env={**os.environ, "ATEN_CPU_CAPABILITY": FORCED},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, (
        f"{lesson} with ATEN_CPU_CAPABILITY={FORCED}: an output depends on the CPU's kernels. "
        f"Print a rounded or a stable quantity instead.\n{result.stdout[-4000:]}"
    )
