"""The checks library works in a learner's copy of the course without the solution package."""

import subprocess
import sys

BLOCK_SOLUTIONS = """
import importlib, pkgutil, sys
sys.modules["solutions"] = None  # any `import solutions...` now fails
import autograder.checks
for info in pkgutil.iter_modules(autograder.checks.__path__):
    importlib.import_module(f"autograder.checks.{info.name}")
print("imported", sorted(m for m in sys.modules if m.startswith("autograder.checks.")))
"""


def test_checks_import_without_the_solution_package():
    result = subprocess.run(
        [sys.executable, "-c", BLOCK_SOLUTIONS], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert (
        "autograder.checks.attention" in result.stdout and "autograder.checks.output_layer" in result.stdout
    )
