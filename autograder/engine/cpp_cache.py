"""Lesson 12's shared cache of C++ builds, filled only by the grader (docs/design/lesson12_grading.md, 2).

A grading kernel that runs ``CppEmbedding = compile_module("Embedding", r\"\"\"...\"\"\")`` builds
the C++ in its own private ``/tmp`` (about 7 s of CPU a module), unless a finished build of the very same
translation unit lies in a cache it can read. A cache that kernels could write would be a channel
between submissions: one could plant a library of its own under the name (hash) of another's
source. So kernels never write the shared cache (the sandbox binds it read-only), and only this
trusted step fills it, before a submission's kernel starts, and only for a lesson with C++
exercises:

- each notebook of the submission is read, never run: an exercise cell counts only when
  ``flags.cpp_cell`` reads it as the lesson's shape; anything else is skipped, and its kernel
  simply builds privately;
- each distinct unit (``libtorch.translation_unit`` and ``libtorch.build_name``, as the kernel
  computes them) not yet in the cache is built in a sandbox of its own (``SandboxSpec``: read-only
  root, no network, the workspace hidden, a private writable folder, the kernels' limits) by the
  compiler alone (``libtorch.build_commands``, computed here: no Python, nothing imported or run),
  within the time the exercise's cell would have had in the kernel;
- the grader copies the library and an empty ``finished`` mark into ``<workspace>/cpp-cache/<name>/``
  as its own files (a staging folder renamed into place, so a kernel never sees half a build).

The cache also holds the precompiled header (``autograder/cpp_pch.py``, ``pch-<hash>/``) and the
binding object that every build links (``autograder/cpp_binding.py``, ``binding-<hash>/``), which
this step makes once each, from the course's own text and torch's headers only (nothing of a
submission), before the first unit: the trusted builds and the kernels' own builds read them
(a few seconds a module instead of 20 to 30 s). Kernels never make either in the shared cache (a
kernel that finds no binding object there makes one in its private folder, for itself). Both
depend on torch, the flags and the compiler only, never on the workspace: the grader makes each
once per machine, in a cache of its own (``cpp_pch.machine_cache``: yours alone, or it is not used), and
links (or copies) it into each workspace's cache, so that a new workspace starts in a second
instead of about 30 s.

A kernel reads no other student's material there: the cache holds successful builds only, with no
source, and kernels cannot list it (``UNLISTED``), so a kernel finds a build only by the hash of a
unit it already holds. Everything else is the grader's, in ``<workspace>/cpp-builds/``, which no
sandbox binds: the lock files, the ``<name>.failed`` marks (a unit whose build fails is not tried
again; its kernel builds privately and reports the compiler's message), and ``builds.log``, which
says what was built, when, for which submission, and how long it took.
"""

import functools
import os
import shlex
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

from autograder import cpp_binding, cpp_pch, libtorch
from autograder.cpp_pch import locked
from autograder.engine.flags import CPP_EXERCISES, cpp_cell
from autograder.engine.kernels.environment import kernel_environment
from autograder.engine.kernels.sandbox import (
    Limits,
    SandboxSpec,
    give_to_sandbox,
    launch,
    needed,
    open_only_by_name,
    private_roots,
    remove_group,
)
from autograder.lessons import EXERCISES

SHARED_FOLDER = "cpp-cache"  # in the grading workspace: kernels read it (by name only)
RECORDS_FOLDER = "cpp-builds"  # beside it, the grader's alone: locks, failed marks, the build log
BUILD_LOG = "builds.log"
PCH_LOG = "pch.log"  # when the precompiled header was made, or why it could not be
BINDING_LOG = "binding.log"  # the same for the binding object
FAILED_SUFFIX = ".failed"
MACHINE_VARIABLE = cpp_pch.MACHINE_VARIABLE  # the grader's cache of headers and binding objects
CPP_LESSONS = frozenset(lesson for lesson, exercises in EXERCISES.items() if CPP_EXERCISES & set(exercises))


def shared_cache(workspace: Path) -> Path:
    """The grader's cache of trusted C++ builds for grading in ``workspace``."""
    return workspace.resolve() / SHARED_FOLDER


def records(cache: Path) -> Path:
    """The grader's own folder beside ``cache``: lock files, failed marks and the build log, which
    no kernel sees (the sandbox hides the workspace and binds back only the cache)."""
    return cache.parent / RECORDS_FOLDER


def submission_units(folder: Path) -> dict[str, str]:
    """Build name -> translation unit of each exercise cell in lesson 12's shape (``cpp_cell``) in the
    notebooks of ``folder`` (at most one per exercise: the kernel can build no more); unreadable
    notebooks give none."""
    units: dict[str, str] = {}
    for path in sorted(folder.glob("*.ipynb")):
        try:
            cells = nbformat.read(path, 4).cells
        except Exception:  # noqa: BLE001 - a notebook nbgrader cannot read either; grading reports it
            continue
        for cell in cells:
            found = cpp_cell(cell.source) if cell.get("cell_type") == "code" else None
            if found is not None and len(units) < len(CPP_EXERCISES):
                unit = libtorch.translation_unit([libtorch.cell_part(found.binding, found.source)])
                units[libtorch.build_name(unit)] = unit
    return units


@dataclass
class Prebuilt:
    """What the trusted step did for one submission: builds made, found finished, failed (name -> why),
    and the seconds it spent, waiting for locks included: the submission's own time."""

    built: list[str] = field(default_factory=list)
    found: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)
    seconds: float = 0.0


def prebuild(
    folder: Path, lesson: str, cache: Path, limits: Limits, cell_limit_s: float, hidden: tuple[Path, ...] = ()
) -> Prebuilt:
    """Build into ``cache`` each unit of the submission of ``lesson`` in ``folder`` that is not there
    yet, each in a sandbox of its own with ``limits`` (``hidden``: folders the build must not see,
    the workspace), each within ``cell_limit_s``, the time its cell would have had to build it in
    the kernel. Nothing for a lesson without C++ exercises, nor where this machine cannot compile
    (the kernels then say what is missing)."""
    done, start = Prebuilt(), time.perf_counter()
    units = submission_units(folder) if lesson in CPP_LESSONS else {}
    if not units or libtorch.missing_tools():
        return done
    kept = records(cache)
    _, binding = prepare(cache)
    if binding is None:  # the kernels build privately, and say why if they cannot either
        return done
    build = functools.partial(_prebuild_unit, done, folder, cache, binding, limits, hidden, cell_limit_s)
    busy = []  # units another grader is building: the others are built meanwhile, then these found
    for name, unit in units.items():
        with locked(kept / f"{name}.lock", wait=False) as held:  # parallel graders build each unit once
            if held:
                build(name, unit)
            else:
                busy.append((name, unit))
    for name, unit in busy:
        with locked(kept / f"{name}.lock"):
            build(name, unit)
    done.seconds = time.perf_counter() - start
    return done


def _prebuild_unit(
    done: Prebuilt,
    folder: Path,
    cache: Path,
    binding: Path,
    limits: Limits,
    hidden: tuple[Path, ...],
    cell_limit_s: float,
    name: str,
    unit: str,
) -> None:
    """``prebuild`` for one unit, its lock held: found finished, failed before, or built now (as
    ``done`` notes)."""
    kept = records(cache)
    if (cache / name / libtorch.FINISHED).is_file():
        done.found.append(name)
        return
    if (kept / f"{name}{FAILED_SUFFIX}").is_file():
        done.failed[name] = (kept / f"{name}{FAILED_SUFFIX}").read_text()
        return
    began = time.perf_counter()
    failure = build_trusted(
        name, unit, cache, binding, limits, hidden, min(libtorch.compile_limit_s(), cell_limit_s)
    )
    seconds = time.perf_counter() - began
    if failure is None:
        done.built.append(name)
    else:
        done.failed[name] = failure.why
        if failure.final:  # a compile error: the same unit fails the same way for anyone
            (kept / f"{name}{FAILED_SUFFIX}").write_text(failure.why)
    _log(kept, f"{name} {'built' if failure is None else 'failed'} in {seconds:.1f} s for {folder}")


def prepare(cache: Path) -> tuple[Path | None, Path | None]:
    """The precompiled header and the binding object in ``cache``, made now where missing and
    where this machine can compile (else (None, None)): `release` calls it, once per workspace, so
    that grading builds only the learners' own units. (The first ``prebuild`` makes them too.)
    The two are made at once, on two cores: 17 s and 14 s of the compiler on a 2-core machine."""
    if libtorch.missing_tools():
        return None, None
    records(cache).mkdir(mode=0o700, parents=True, exist_ok=True)
    cache.mkdir(parents=True, exist_ok=True)
    open_only_by_name(cache)
    with ThreadPoolExecutor(1) as pool:
        binding = pool.submit(trusted_binding, cache)
        return trusted_pch(cache), binding.result()


def trusted_pch(cache: Path) -> Path | None:
    """The precompiled header in ``cache``, made now by the grader if missing (trusted text only: the
    course's ``#include`` lines and the headers they name), or None where it cannot be made (the
    builds then read the headers: slower, the same code). A failure is remembered and logged."""
    return _trusted(
        cache / cpp_pch.folder_name(libtorch.UNIT_HEAD),
        lambda root: cpp_pch.finished([root], libtorch.UNIT_HEAD, libtorch.FINISHED),
        lambda into: cpp_pch.build(into, libtorch.UNIT_HEAD, libtorch.FINISHED, libtorch.compile_limit_s()),
        PCH_LOG,
    )


def trusted_binding(cache: Path) -> Path | None:
    """The binding object in ``cache``, made now by the grader if missing (trusted text only: the
    course's binding code and torch's headers), or None where it cannot be made (then nothing is
    prebuilt: each kernel builds privately). A failure is remembered and logged."""
    return _trusted(
        cache / cpp_binding.folder_name(),
        lambda root: cpp_binding.finished([root], libtorch.FINISHED),
        lambda into: cpp_binding.build(into, libtorch.FINISHED, libtorch.compile_limit_s()),
        BINDING_LOG,
    )


def _trusted(
    folder: Path, find: Callable[[Path], Path | None], make: Callable[[Path], Path], log: str
) -> Path | None:
    """A shared artefact of the grader's in ``folder``: the one ``find`` finds in its cache, else one
    taken from the machine's cache (``from_machine``: made there by ``make`` first if missing), one
    grader at a time; else None. A failure is remembered, so that it is tried once."""
    cache, kept = folder.parent, records(folder.parent)
    with locked(kept / f"{folder.name}.lock"):
        found = find(cache)
        failed = kept / f"{folder.name}{FAILED_SUFFIX}"
        if found is not None or failed.is_file():
            return found
        began = time.perf_counter()
        try:
            how = from_machine(folder, find, make)
        except (RuntimeError, OSError, subprocess.TimeoutExpired) as error:
            failed.write_text(str(error))
            _log(kept, f"{folder.name} failed in {time.perf_counter() - began:.1f} s: {error}", log)
            return None
        _log(kept, f"{folder.name} {how} in {time.perf_counter() - began:.1f} s", log)
        return find(cache)


def from_machine(folder: Path, find: Callable[[Path], Path | None], make: Callable[[Path], Path]) -> str:
    """Fill ``folder`` (missing) with the same folder of the machine's cache, made there by ``make``
    if ``find`` finds none (one grader at a time), by hard links or else copies, through a staging
    folder renamed into place; how: "built", or "linked from <cache>". Without a machine cache, or
    where its folder is not this user's alone (``cpp_pch.private``) and cannot be removed, ``make`` makes
    ``folder`` itself."""
    machine = cpp_pch.machine_cache(make=True)
    if machine is None:
        make(folder)
        return "built"
    source = machine / folder.name
    with locked(machine / f"{folder.name}.lock"):
        found = find(machine) is not None
        usable = found and all(cpp_pch.private(path) for path in (source, *source.iterdir()))
        if not usable:
            shutil.rmtree(source, ignore_errors=True)
            if source.exists() or source.is_symlink():
                make(folder)
                return "built"
            make(source)
            # one header and one binding object per installation: those of an older torch go
            cpp_pch.prune(machine, [cpp_pch.folder_name(libtorch.UNIT_HEAD), cpp_binding.folder_name()])
        staging = folder.with_name(f".{folder.name}-{os.getpid()}")
        shutil.rmtree(staging, ignore_errors=True)
        staging.mkdir()
        try:
            for path in source.iterdir():
                try:
                    os.link(path, staging / path.name)
                except OSError:  # another file system
                    shutil.copy2(path, staging / path.name)
            staging.chmod(0o755)
            os.rename(staging, folder)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    return "linked from " + str(machine) if usable else "built"


@dataclass(frozen=True)
class Failure:
    """Why a trusted build failed; ``final`` when any later try of the unit would fail alike (a
    compile error), not when it ran out of the submission's time."""

    why: str
    final: bool


def build_trusted(
    name: str,
    unit: str,
    cache: Path,
    binding: Path,
    limits: Limits,
    hidden: tuple[Path, ...],
    limit_s: float,
) -> Failure | None:
    """Build ``unit`` as ``name`` in a sandbox of its own within ``limit_s`` (reading the precompiled
    header in ``cache`` when there is one, linking the grader's ``binding`` object), then install
    the library in ``cache``; None when it did, else why not (the compiler's message, the limit)."""
    work = Path(tempfile.mkdtemp(prefix="course-cpp-build-"))
    try:
        build = work / name
        build.mkdir()
        (build / "unit.cpp").write_text(unit)
        give_to_sandbox(work)
        pch = cpp_pch.finished([cache], libtorch.UNIT_HEAD, libtorch.FINISHED)
        failure = _run_build(build, name, limits, hidden, limit_s, (pch, binding))
        if failure is not None:
            return failure
        library = build / f"{name}.so"
        if library.is_symlink() or not library.is_file():
            return Failure("the build left no library", final=True)
        install(library, name, cache)
        return None
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _run_build(
    build: Path,
    name: str,
    limits: Limits,
    hidden: tuple[Path, ...],
    limit: float,
    reads: tuple[Path | None, Path],
) -> Failure | None:
    """Compile and link the unit in ``build`` in its sandbox within ``limit`` seconds, reading
    ``reads`` (the precompiled header, if any, and the binding object; their folders bound
    read-only); None when it succeeded. The compiler runs alone (``libtorch.compile_and_link``
    with ``_in_sandbox``): no Python child starts, so a unit costs its compile and nothing else."""
    pch, binding = reads
    spec = SandboxSpec(
        limits,
        writable=(build.parent,),
        hidden=tuple(folder.resolve() for folder in hidden),
        readable=tuple(needed()),
        private=tuple(private_roots()),
        shared=tuple(path.parent for path in reads if path is not None),
    )
    run = functools.partial(_in_sandbox, spec, build)
    finished = libtorch.compile_and_link(build, name, pch, binding, limit, run)
    if finished is None:
        return Failure(f"did not compile within {limit:.0f} s", final=False)
    log, status = finished
    if status != 0:
        found = libtorch.FIRST_ERROR.search(log)
        why = found.group(0) if found else f"the build exited {status}: {log.strip()[-400:]}"
        return Failure(why, final=True)
    return None


def _in_sandbox(
    spec: SandboxSpec, build: Path, commands: list[list[str]], limit_s: float
) -> tuple[str, int] | None:
    """``commands`` run one after the other (``sh`` chains them) in one sandbox of ``spec``: their
    output and the last exit status, or None past ``limit_s`` seconds (the sandbox's processes
    killed)."""
    launched = launch(
        spec,
        ["/bin/sh", "-c", " && ".join(shlex.join(command) for command in commands)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**kernel_environment(os.environ), "MAX_JOBS": "1"},
        cwd=str(build),
        start_new_session=True,
    )
    process = launched.process
    try:
        log, _ = process.communicate(timeout=max(limit_s, 0.01))
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.communicate()
        return None
    finally:
        if launched.group is not None:
            remove_group(launched.group)
    return log, process.returncode


def install(library: Path, name: str, cache: Path) -> None:
    """Copy ``library`` and an empty ``finished`` mark (no source: kernels read this folder) into
    ``cache/name/`` as the grader's own files, through a staging folder renamed into place; a build
    already there is kept."""
    staging = Path(tempfile.mkdtemp(prefix=f".{name}-", dir=cache))
    try:
        shutil.copyfile(library, staging / f"{name}.so", follow_symlinks=False)
        (staging / libtorch.FINISHED).write_text("")
        for path in staging.iterdir():
            path.chmod(0o644)
        staging.chmod(0o755)
        os.rename(staging, cache / name)
    except OSError:
        if not (cache / name / libtorch.FINISHED).is_file():
            raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def clean(workspace: Path) -> int:
    """Remove the grader's C++ builds for ``workspace`` (the shared cache, the precompiled header,
    the binding object, the records beside them); the bytes freed: a file also linked from the
    machine's cache (``cpp_pch.machine_cache``, which keeps one header and binding object) frees nothing.
    Grading afterwards builds again: run it between grading runs, not during one."""
    cache = shared_cache(workspace)
    freed = 0
    for folder in (cache, records(cache)):
        if folder.is_dir():
            facts = [path.stat() for path in folder.rglob("*") if path.is_file() and not path.is_symlink()]
            freed += sum(fact.st_size for fact in facts if fact.st_nlink == 1)
            shutil.rmtree(folder)
    return freed


def builds_logged(cache: Path) -> list[str]:
    """The lines of the build log kept beside ``cache``: one per unit the trusted step built or
    failed to build (the precompiled header's are in ``PCH_LOG``)."""
    log = records(cache) / BUILD_LOG
    return log.read_text().splitlines() if log.is_file() else []


def _log(kept: Path, line: str, log_name: str = BUILD_LOG) -> None:
    with open(kept / log_name, "a") as log:
        log.write(f"{time.strftime('%Y-%m-%dT%H:%M:%S')} {line}\n")
