"""Lesson 12's shared cache of C++ builds, filled only by the grader (docs/design/lesson12_grading.md, 2).

A grading kernel that runs ``CppEmbedding = compile_module("Embedding", r\"\"\"...\"\"\")`` builds
the C++ in its own private ``/tmp`` (about 20 s a module), unless a finished build of the very same
translation unit lies in a cache it can read. A cache that kernels could write would be a channel
between submissions: one could plant a library of its own under the name (hash) of another's
source. So kernels never write the shared cache (the sandbox binds it read-only), and only this
trusted step fills it, before a submission's kernel starts:

- each notebook of the submission is read, never run: an exercise cell counts only when it is
  exactly one assignment ``<exercise> = compile_module("<binding>", <string literal>)``; anything
  else is skipped, and its kernel simply builds privately;
- each distinct unit (``libtorch.translation_unit`` and ``libtorch.build_name``, as the kernel
  computes them) not yet in the cache is built in a sandbox of its own (``SandboxSpec``: read-only
  root, no network, the workspace hidden, a private writable folder, the kernels' limits) by
  ``python -m autograder.libtorch build FOLDER NAME --no-import``: ninja and the compiler, nothing
  imported or run;
- the grader copies the library and the ``finished`` mark into ``<workspace>/cpp-cache/<name>/``
  as its own files (a staging folder renamed into place, so a kernel never sees half a build).

A unit whose build fails gets a ``<name>.failed`` mark and is not tried again; its kernel builds
privately and reports the compiler's message. ``builds.log`` in the cache says what was built,
when, for whom, and how long it took.
"""

import ast
import fcntl
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

from autograder import libtorch
from autograder.engine.flags import CPP_EXERCISES
from autograder.engine.kernels import seccomp
from autograder.engine.kernels.sandbox import (
    Limits,
    SandboxSpec,
    give_to_sandbox,
    kernel_environment,
    needed,
    private_roots,
    remove_group,
    sandbox_group,
)

SHARED_FOLDER = "cpp-cache"  # in the grading workspace
BUILD_LOG = "builds.log"
FAILED_SUFFIX = ".failed"


def shared_cache(workspace: Path) -> Path:
    """The grader's cache of trusted C++ builds for grading in ``workspace``."""
    return workspace.resolve() / SHARED_FOLDER


def literal_module(source: str) -> tuple[str, str] | None:
    """(binding, C++) when the cell ``source`` is exactly ``<exercise> = compile_module("<binding>",
    <C++>)`` with both arguments string literals, the exercise one of lesson 12's and the binding
    one the course knows; None otherwise (the cell is then not prebuilt)."""
    try:
        body = ast.parse(source).body
    except SyntaxError:
        return None
    if len(body) != 1 or not isinstance(body[0], ast.Assign) or len(body[0].targets) != 1:
        return None
    target, call = body[0].targets[0], body[0].value
    if not (isinstance(target, ast.Name) and target.id in CPP_EXERCISES and isinstance(call, ast.Call)):
        return None
    if not (isinstance(call.func, ast.Name) and call.func.id == "compile_module") or call.keywords:
        return None
    texts = [arg.value for arg in call.args if isinstance(arg, ast.Constant) and isinstance(arg.value, str)]
    if len(call.args) != 2 or len(texts) != 2 or texts[0] not in libtorch.BINDINGS:
        return None
    return texts[0], texts[1]


def submission_units(folder: Path) -> dict[str, str]:
    """Build name -> translation unit of each literal ``compile_module`` cell in the notebooks of
    ``folder`` (at most one per exercise: the kernel can build no more); unreadable notebooks give none."""
    units: dict[str, str] = {}
    for path in sorted(folder.glob("*.ipynb")):
        try:
            cells = nbformat.read(path, 4).cells
        except Exception:  # noqa: BLE001 - a notebook nbgrader cannot read either; grading reports it
            continue
        for cell in cells:
            found = literal_module(cell.source) if cell.get("cell_type") == "code" else None
            if found is not None and len(units) < len(CPP_EXERCISES):
                unit = libtorch.translation_unit([libtorch.cell_part(*found)])
                units[libtorch.build_name(unit)] = unit
    return units


@dataclass
class Prebuilt:
    """What the trusted step did for one submission: builds made, found finished, failed (name -> why)."""

    built: list[str] = field(default_factory=list)
    found: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)


def prebuild(folder: Path, cache: Path, limits: Limits, hidden: tuple[Path, ...] = ()) -> Prebuilt:
    """Build into ``cache`` each unit of the submission in ``folder`` that is not there yet, each in
    a sandbox of its own with ``limits`` (``hidden``: folders the build must not see, the
    workspace). Nothing when this machine cannot compile: the kernels then say what is missing."""
    done = Prebuilt()
    units = submission_units(folder)
    if not units or libtorch.missing_tools():
        return done
    cache.mkdir(parents=True, exist_ok=True)
    cache.chmod(0o755)
    for name, unit in units.items():
        with _locked(cache / f"{name}.lock"):  # parallel graders build each unit once
            if (cache / name / libtorch.FINISHED).is_file():
                done.found.append(name)
                continue
            if (cache / f"{name}{FAILED_SUFFIX}").is_file():
                done.failed[name] = (cache / f"{name}{FAILED_SUFFIX}").read_text()
                continue
            start = time.perf_counter()
            why = build_trusted(name, unit, cache, limits, hidden)
            seconds = time.perf_counter() - start
            if why is None:
                done.built.append(name)
            else:
                done.failed[name] = why
                (cache / f"{name}{FAILED_SUFFIX}").write_text(why)
            _log(cache, f"{name} {'built' if why is None else 'failed'} in {seconds:.1f} s for {folder}")
    return done


def build_trusted(name: str, unit: str, cache: Path, limits: Limits, hidden: tuple[Path, ...]) -> str | None:
    """Build ``unit`` as ``name`` in a sandbox of its own, then install the library in ``cache``;
    None when it did, else why not (the compiler's message, the limit)."""
    work = Path(tempfile.mkdtemp(prefix="course-cpp-build-"))
    try:
        build = work / name
        build.mkdir()
        (build / "unit.cpp").write_text(unit)
        give_to_sandbox(work)
        why = _run_build(build, name, limits, hidden)
        if why is not None:
            return why
        library = build / f"{name}.so"
        if library.is_symlink() or not library.is_file():
            return "the build left no library"
        install(library, name, unit, cache)
        return None
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _run_build(build: Path, name: str, limits: Limits, hidden: tuple[Path, ...]) -> str | None:
    """Run the build child in its sandbox under the compile-time limit; None when it succeeded."""
    spec = SandboxSpec(
        limits,
        writable=(build.parent,),
        hidden=tuple(folder.resolve() for folder in hidden),
        readable=tuple(needed()),
        private=tuple(private_roots()),
    )
    child = [sys.executable, "-m", "autograder.libtorch", "build", str(build), name, "--no-import"]
    keyring_filter = seccomp.filter_fd()
    command = spec.command(child, seccomp_fd=keyring_filter)
    group = sandbox_group(limits)
    if group is not None:
        command = group.join(command)
    environment = {**kernel_environment(os.environ), "MAX_JOBS": "1"}
    limit = libtorch.compile_limit_s()
    try:
        process = subprocess.Popen(
            command,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=environment,
            cwd=str(build),
            pass_fds=(keyring_filter,),
            start_new_session=True,
        )
    finally:
        os.close(keyring_filter)
    try:
        log, _ = process.communicate(timeout=limit)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.communicate()
        return f"did not compile within {limit:.0f} s"
    finally:
        if group is not None:
            remove_group(group)
    if process.returncode != 0:
        found = libtorch.FIRST_ERROR.search(log)
        return found.group(0) if found else f"the build exited {process.returncode}: {log.strip()[-400:]}"
    return None


def install(library: Path, name: str, unit: str, cache: Path) -> None:
    """Copy ``library`` and the ``finished`` mark into ``cache/name/`` as the grader's own files,
    through a staging folder renamed into place; a build already there is kept."""
    staging = Path(tempfile.mkdtemp(prefix=f".{name}-", dir=cache))
    try:
        shutil.copyfile(library, staging / f"{name}.so", follow_symlinks=False)
        (staging / libtorch.FINISHED).write_text(unit)
        for path in staging.iterdir():
            path.chmod(0o644)
        staging.chmod(0o755)
        os.rename(staging, cache / name)
    except OSError:
        if not (cache / name / libtorch.FINISHED).is_file():
            raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def builds_logged(cache: Path) -> list[str]:
    """The lines of the cache's build log: one per unit the trusted step built or failed to build."""
    log = cache / BUILD_LOG
    return log.read_text().splitlines() if log.is_file() else []


def _log(cache: Path, line: str) -> None:
    with open(cache / BUILD_LOG, "a") as log:
        log.write(f"{time.strftime('%Y-%m-%dT%H:%M:%S')} {line}\n")


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    """Hold an exclusive lock on ``path`` (a file, made if missing) for the block."""
    with open(path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
