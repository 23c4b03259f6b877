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


def test_a_missing_optional_parameter_is_named_with_the_signature_to_keep():
    import pytest
    import torch

    from autograder.checks import CheckFailure, masking

    def causal_mask(size):  # right values, but no `device` parameter
        return torch.ones(size, size, dtype=torch.bool).tril()

    masking.check_causal_mask_shape(causal_mask)  # called with the contract's own arguments: passes
    with pytest.raises(
        CheckFailure, match=r"Keep the exercise's signature, `def causal_mask\(size, device=None\):`"
    ):
        masking.check_causal_mask_values(causal_mask)
