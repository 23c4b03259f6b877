"""Lesson 12's precompiled header: torch's headers compiled once, so that a module's build takes
seconds instead of the compiler reading all of torch for every unit (autograder/libtorch.py).

A unit starts with a fixed list of ``#include`` lines (``libtorch.UNIT_HEAD``). That text, as the
header ``course_torch.h``, is compiled once into ``course_torch.h.gch`` in a folder
``pch-<hash>/`` of a cache (the hash of the text, torch's version, the flags and the compiler),
with a ``finished`` mark written last. A build then passes ``-include <folder>/course_torch.h``:
the compiler loads the ``.gch`` instead of parsing the headers, and the unit's own ``#include``
lines are skipped by the headers' include guards, so the code compiled is the same. Where g++
finds a ``.gch`` that does not match the build's flags it reads the header itself
(``-Winvalid-pch`` says so in the build's log): slower, never wrong. Only trusted text goes into
it: the course's fixed lines and the headers they name.

The compiler (``compiler``): ``COURSE_CXX`` when set, else clang++ where it is installed, else
``CXX`` or c++. clang's header also holds the template instantiations that torch's headers ask of
every unit (``-fpch-instantiate-templates``), which g++ redoes at the end of each unit: a later
module's compile costs about 2 s of CPU with clang, 6 s with g++, and the header is 150 MB, not
700. clang reads the ``.gch`` name too. Each folder records the install that made it
(``MADE_FOR``), so that a learner's new header can remove what that install made before
(``prune``).

The header also declares extern the class templates of torch's that every unit would otherwise
instantiate again at its end (their vtables: ``torch::nn::Cloneable<torch::nn::LinearImpl>`` and
the like, listed in ``torch_instances.txt`` for one torch version by
``python -m autograder.authoring.torch_instances``): a unit then compiles in about 1.2 s of CPU
instead of 1.7. Their explicit instantiation is compiled once, into ``INSTANCES`` beside the
header, and every build links it: the linker takes it only where a unit needs it (a learner's
class derived from one of torch's modules). For another torch version, or where that
instantiation does not compile, the header declares nothing extern and there is no archive.
"""

import fcntl
import functools
import hashlib
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import torch

HEADER = "course_torch.h"  # the compiler reads course_torch.h.gch beside it
INSTANCES = "libcourse_instances.a"  # beside it: the explicit instantiations it declares extern
INSTANCES_LIST = Path(__file__).with_name("torch_instances.txt")
INSTANCES_VERSION_PREFIX = "torch "  # the list's first line: "# torch <the version it is for>"
MACHINE_VARIABLE = "COURSE_GRADER_CPP_CACHE"  # the grader's cache of headers and binding objects
COMPILER_VARIABLE = "COURSE_CXX"
MADE_FOR = "made-for"  # in each folder: the Python installation (sys.prefix) whose build made it
PREFIXES = ("pch-", "binding-")  # the folders of a cache that hold no learner's build


def compiler() -> str:
    """The C++ compiler of lesson 12's builds: ``COURSE_CXX``, else clang++ when it is on the
    search path, else ``CXX``, else c++."""
    forced = os.environ.get(COMPILER_VARIABLE)
    if forced:
        return forced
    return "clang++" if shutil.which("clang++") else os.environ.get("CXX", "c++")


@functools.cache
def _identity(command: str) -> str:
    try:
        done = subprocess.run([command, "--version"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    first = done.stdout.strip().split("\n")[0]
    return f"{os.path.realpath(shutil.which(command) or command)} {first}"


def compiler_identity() -> str:
    """The compiler's path and the first line of its ``--version`` ("" when it does not run):
    part of every cache key, since a header or an object is only for the compiler that made it."""
    return _identity(compiler())


def is_clang() -> bool:
    return "clang" in compiler_identity()


def header_size_mb() -> int:
    """About the size of the precompiled header, in MB."""
    return 150 if is_clang() else 700


def flags() -> list[str]:
    """The flags a unit compiles with, as torch's own extension builds (less the unit's name and
    ``-DTORCH_API_INCLUDE_EXTENSION_H``, with which ``torch/torch.h`` would bring Python and
    pybind11: only the binding object, ``cpp_binding``, includes those). A precompiled header is
    used only by a compile with the same flags."""
    from torch.utils.cpp_extension import include_paths

    folders = [*include_paths(), sysconfig.get_paths()["include"]]
    return [*(f"-isystem{folder}" for folder in folders), "-fPIC", "-std=c++20"]


def link_flags() -> list[str]:
    """What a build's library links against, as torch's extension builds: torch's own libraries."""
    from torch.utils.cpp_extension import library_paths

    return [
        *(f"-L{folder}" for folder in library_paths()),
        "-lc10",
        "-ltorch_cpu",
        "-ltorch",
        "-ltorch_python",
    ]


def use_flags(header: Path) -> list[str]:
    """The flags of a compile that reads the precompiled ``header`` first. clang compares a header
    file's content where its time changed (a reinstall of the same torch), not its time alone."""
    content = ["-fpch-validate-input-files-content"] if is_clang() else []
    return ["-include", str(header), "-Winvalid-pch", *content]


# clang refuses a header it cannot use (g++ warns and reads the headers): not the learner's error
REFUSED = re.compile(r"^(?:fatal )?error: .*(?:PCH file|AST file|precompiled header)", re.M)


def refused(log: str) -> bool:
    """Whether a compile failed because the compiler would not read its precompiled header."""
    return REFUSED.search(log) is not None


def listed_instances() -> list[str]:
    """The class templates that ``INSTANCES_LIST`` names for the installed torch's version (its CPU or
    CUDA build alike; none for another version)."""
    lines = INSTANCES_LIST.read_text().splitlines() if INSTANCES_LIST.is_file() else []
    if not lines or lines[0] != f"# {INSTANCES_VERSION_PREFIX}{torch_release()}":
        return []
    return [line for line in lines[1:] if line.strip()]


def torch_release() -> str:
    """The installed torch's version without its build (``2.13.0``, not ``2.13.0+cpu``)."""
    return torch.__version__.split("+")[0]


def text(head: Sequence[str], extern: Sequence[str]) -> str:
    """The precompiled header's text: the ``head`` lines, then each class template of ``extern``
    declared as explicitly instantiated elsewhere (``INSTANCES``)."""
    return "\n".join([*head, *(f"extern template class {name};" for name in extern)]) + "\n"


def compile_instances(folder: Path, extern: Sequence[str], limit_s: float) -> str | None:
    """Compile the explicit instantiation of each class template of ``extern`` into ``INSTANCES`` in
    ``folder``, reading its precompiled header; None when it did, else why not."""
    source = folder / "instances.cpp"
    source.write_text("".join(f"template class {name};\n" for name in extern))
    objects = folder / "instances.o"
    compile_unit = [compiler(), *flags(), *use_flags(folder / HEADER), "-c", str(source), "-o", str(objects)]
    archive = ["ar", "rcs", str(folder / INSTANCES), str(objects)]
    try:
        for command in (compile_unit, archive):
            done = subprocess.run(command, capture_output=True, text=True, timeout=limit_s)
            if done.returncode != 0:
                return done.stderr.strip()[-400:]
    except (OSError, subprocess.TimeoutExpired) as error:
        return str(error)
    finally:
        source.unlink()
        objects.unlink(missing_ok=True)
    return None


def linked(header: Path) -> list[str]:
    """What a build that reads the precompiled ``header`` links after its objects: its
    ``INSTANCES`` archive, where it has one."""
    archive = header.with_name(INSTANCES)
    return [str(archive)] if archive.is_file() else []


def folder_name(head: Sequence[str]) -> str:
    """The folder of the precompiled ``head`` for this torch, these flags and this compiler."""
    digest = hashlib.sha256()
    for part in (text(head, listed_instances()), torch.__version__, " ".join(flags()), compiler_identity()):
        digest.update(part.encode())
        digest.update(b"\0")
    return f"pch-{digest.hexdigest()[:20]}"


def finished(roots: Sequence[Path], head: Sequence[str], mark: str) -> Path | None:
    """The header of a finished precompiled ``head`` in the first of ``roots`` that holds one (its
    folder has the ``mark`` file and the ``.gch``), or None."""
    for root in roots:
        folder = root / folder_name(head)
        if (folder / mark).is_file() and (folder / f"{HEADER}.gch").is_file():
            return folder / HEADER
    return None


def build(folder: Path, head: Sequence[str], mark: str, limit_s: float) -> Path:
    """Compile ``head`` into ``folder`` (which must not exist yet) within ``limit_s`` seconds, through
    a staging folder renamed into place with its ``mark`` in it; the header's path. Raises
    RuntimeError when the compiler fails, subprocess.TimeoutExpired past the limit."""
    staging = folder.with_name(f".{folder.name}-{os.getpid()}")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    began, extern = time.monotonic(), listed_instances()
    try:
        try:
            _precompile(staging, head, extern, limit_s)
            plain = bool(extern) and compile_instances(staging, extern, limit_s) is not None
        except RuntimeError:
            if not extern:
                raise
            plain = True
        if plain:  # the list does not fit this torch: nothing extern, no archive
            (staging / INSTANCES).unlink(missing_ok=True)
            _precompile(staging, head, [], limit_s - (time.monotonic() - began))
        record(staging)
        (staging / mark).write_text("")
        for path in staging.iterdir():
            path.chmod(0o644)
        staging.chmod(0o755)
        os.rename(staging, folder)
    except OSError:
        if not (folder / mark).is_file():  # another process finished the same one first: keep it
            raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return folder / HEADER


def _precompile(folder: Path, head: Sequence[str], extern: Sequence[str], limit_s: float) -> None:
    """Write the header's text (``text``) into ``folder`` and precompile it beside it."""
    header = folder / HEADER
    header.write_text(text(head, extern))
    # clang's header names the file it was made from, which must exist when it is read: it reads
    # the text from its input instead, since the staging folder is renamed
    source, given = ("-", header.read_text()) if is_clang() else (str(header), None)
    instantiate = ["-fpch-instantiate-templates"] if is_clang() else []
    command = [compiler(), "-x", "c++-header", *flags(), *instantiate, source, "-o", f"{header}.gch"]
    done = subprocess.run(command, input=given, capture_output=True, text=True, timeout=max(limit_s, 1))
    if done.returncode != 0:
        raise RuntimeError(f"torch's headers did not precompile: {done.stderr.strip()[-400:]}")


def for_build(
    roots: Sequence[Path], head: Sequence[str], mark: str, limit_s: float, make: bool
) -> Path | None:
    """The precompiled header a new build uses: a finished one in ``roots``, else (with ``make``: on a
    learner's machine, never in a grading kernel) one made now in the first root, telling the learner
    that this first build takes longer; None when there is none (the build reads the headers
    themselves: slower, the same code)."""
    found = finished(roots, head, mark)
    if found is not None or not make:
        return found
    folder = roots[0] / folder_name(head)
    try:
        folder.parent.mkdir(parents=True, exist_ok=True)
        with locked(folder.with_name(f".{folder.name}.lock")):  # two first builds at once: one precompiles
            found = finished(roots, head, mark)
            if found is not None:
                return found
            print(
                "The first C++ build on this machine precompiles torch's headers once (1 to 3 minutes, "
                f"about {header_size_mb()} MB in {folder}); later builds then take seconds.",
                flush=True,
            )
            return build(folder, head, mark, limit_s)
    except (RuntimeError, OSError, subprocess.TimeoutExpired) as error:
        print(f"(building without the precompiled header: {error})", flush=True)
        return None


@contextmanager
def locked(path: Path, wait: bool = True) -> Iterator[bool]:
    """Hold an exclusive lock on ``path`` (a file, made if missing) for the block; with ``wait``
    false, the block runs at once and is told whether it holds the lock (False: another has it).
    The lock ends with its holder's process, so a build that died leaves none behind."""
    with open(path, "a") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX if wait else fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        try:
            yield True
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def machine_cache(make: bool = False) -> Path | None:
    """The grader's cache on this machine of the precompiled headers and binding objects (the same
    in every workspace): ``COURSE_GRADER_CPP_CACHE``, else ``transformer-course/grader`` in the user's
    cache folder; made here with ``make`` (the grader), else only read where it exists (a learner's
    builds on the grader's machine). None where it is missing or cannot be made, or where it is
    not this user's alone: a folder that another user owns or may write could hold a planted header."""
    try:
        configured = os.environ.get(MACHINE_VARIABLE)
        home = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "transformer-course"
        folder = Path(configured) if configured else home / "grader"
        if make:
            folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    except (OSError, RuntimeError):  # no home folder, a read-only one
        return None
    return folder if private(folder) else None


def private(path: Path) -> bool:
    """Whether ``path`` (not a link) is this user's and no one else may write it."""
    try:
        facts = path.lstat()
    except OSError:
        return False
    return not path.is_symlink() and facts.st_uid == os.getuid() and not facts.st_mode & 0o022


def record(folder: Path) -> None:
    """Write into ``folder`` which installation made it (``MADE_FOR``)."""
    (folder / MADE_FOR).write_text(sys.prefix)


def prune(root: Path, keep: Sequence[str]) -> list[str]:
    """Remove the headers and binding objects of the learner's cache ``root`` that no build of this
    installation can use any more: the ``pch-*`` and ``binding-*`` folders other than ``keep``
    that this installation made (for another torch, other flags, another compiler), that an
    installation since removed made, or that name no maker (made before folders said). Another
    installation's that still exists are kept: it may share the cache. The names removed."""
    removed = []
    for folder in sorted(root.glob("*-*")) if root.is_dir() else []:
        if not folder.name.startswith(PREFIXES) or folder.name in keep or not folder.is_dir():
            continue
        maker = folder / MADE_FOR
        made_by = maker.read_text() if maker.is_file() else ""
        if made_by and made_by != sys.prefix and Path(made_by).is_dir():
            continue
        shutil.rmtree(folder, ignore_errors=True)
        removed.append(folder.name)
    return removed
