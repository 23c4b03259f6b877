"""The wheels the GPU checks need beyond PyTorch, derived from this environment's metadata.

A GPU machine comes with its own CUDA build of PyTorch and, often, no network
(tests/gpu_checks.sh). What it lacks is the closure of what the checks import (pytest with its
workers, nbval and a Jupyter kernel, the lessons' own imports) under Python 3.12 on Linux, less
PyTorch and everything PyTorch itself requires. This module derives that list from the installed
packages of the pinned set (``make setup``), with the versions installed here:

    .venv/bin/python tests/gpu_wheels.py > tests/gpu_wheels.txt

tests/gpu_wheels.sh downloads the list's wheels with ``--no-deps``; tests/test_workflows.py checks
that the committed list is what this derivation gives today.
"""

import importlib.metadata
import sys

from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

# What the GPU checks run: pytest with workers (tests/test_mutations.py), nbval over a Jupyter
# kernel (the source notebooks), the lessons' imports and lesson 12's C++ build (ninja), and the
# build backend of the course's own editable install (pyproject.toml's build-system).
NEEDED = [
    "pytest",
    "pytest-xdist",
    "nbval",
    "ipykernel",
    "nbclient",
    "nbformat",
    "numpy",
    "matplotlib",
    "ninja",
]
BUILD_BACKEND = "setuptools"
PROVIDED = "torch"  # the GPU machine's own build, with what it requires


def target_environment(python_version: str) -> dict[str, str]:
    """Marker values of CPython ``python_version`` ("3.12") on x86_64 Linux."""
    environment = default_environment()
    environment.update(
        python_version=python_version,
        python_full_version=f"{python_version}.0",
        implementation_name="cpython",
        platform_python_implementation="CPython",
        sys_platform="linux",
        platform_system="Linux",
        platform_machine="x86_64",
        os_name="posix",
    )
    return environment


def closure(roots: list[str], environment: dict[str, str]) -> set[str]:
    """The canonical names of ``roots`` and of everything they require in ``environment``,
    extras included, read from the installed packages' metadata."""
    seen: set[str] = set()
    pending = [(root, frozenset()) for root in roots]
    visited: set[tuple[str, frozenset[str]]] = set()
    while pending:
        name, extras = pending.pop()
        if (canonicalize_name(name), extras) in visited:
            continue
        visited.add((canonicalize_name(name), extras))
        seen.add(canonicalize_name(name))
        for line in importlib.metadata.requires(name) or []:
            requirement = Requirement(line)
            wanted = [{**environment, "extra": extra} for extra in ("", *extras)]
            if requirement.marker is None or any(requirement.marker.evaluate(env) for env in wanted):
                pending.append((requirement.name, frozenset(requirement.extras)))
    return seen


def missing_wheels(python_version: str = "3.12") -> list[str]:
    """``name==version`` for each package the GPU checks need beyond PyTorch and its requirements."""
    environment = target_environment(python_version)
    needed = closure(NEEDED, environment) - closure([PROVIDED], environment)
    needed.add(canonicalize_name(BUILD_BACKEND))
    return sorted(f"{name}=={importlib.metadata.version(name)}" for name in needed)


if __name__ == "__main__":
    print("\n".join(missing_wheels(*sys.argv[1:])))
