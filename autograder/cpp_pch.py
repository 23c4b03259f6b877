"""Lesson 12's precompiled header: torch's headers compiled once, so that a module's build takes
seconds instead of the compiler reading all of torch for every unit (autograder/libtorch.py).

A unit starts with a fixed list of ``#include`` lines (``libtorch.UNIT_HEAD``). That text, as the
header ``course_torch.h``, is compiled once into ``course_torch.h.gch`` in a folder
``pch-<hash>/`` of a cache (the hash of the text, torch's version, the flags and the compiler),
with a ``finished`` mark written last. A build then passes ``-include <folder>/course_torch.h``:
the compiler loads the ``.gch`` instead of parsing the headers, and the unit's own ``#include``
lines are skipped by the headers' include guards, so the code compiled is the same. Where the
``.gch`` does not match the build's flags the compiler reads the header itself (``-Winvalid-pch``
says so in the build's log): slower, never wrong. Only trusted text goes into it: the course's
fixed lines and the headers they name.
"""

import hashlib
import os
import shutil
import subprocess
import sysconfig
from collections.abc import Sequence
from pathlib import Path

import torch

HEADER = "course_torch.h"  # the compiler reads course_torch.h.gch beside it
PCH_MB = 700  # about the size of the .gch, in MB


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


def folder_name(head: Sequence[str]) -> str:
    """The folder of the precompiled ``head`` for this torch, these flags and this compiler."""
    digest = hashlib.sha256()
    for part in ("\n".join(head), torch.__version__, " ".join(flags()), shutil.which("c++") or ""):
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
    header = staging / HEADER
    header.write_text("\n".join(head) + "\n")
    compiler = os.environ.get("CXX", "c++")
    command = [compiler, "-x", "c++-header", *flags(), str(header), "-o", f"{header}.gch"]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=limit_s)
        if done.returncode != 0:
            raise RuntimeError(f"torch's headers did not precompile: {done.stderr.strip()[-400:]}")
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
    print(
        "The first C++ build on this machine precompiles torch's headers once (1 to 3 minutes, about "
        f"{PCH_MB} MB in {folder}); later builds then take seconds.",
        flush=True,
    )
    try:
        return build(folder, head, mark, limit_s)
    except (RuntimeError, OSError, subprocess.TimeoutExpired) as error:
        print(f"(building without the precompiled header: {error})", flush=True)
        return None
