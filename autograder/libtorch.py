"""Lesson 12's C++ modules: compile a learner's LibTorch source and use it from Python.

``compile_module`` adds to a learner's ``torch::nn::Module`` (``struct EmbeddingImpl``) what the
learner does not write (a few lines that hand it to the course's Python binding, ``cpp_binding``,
with the contract's arguments), compiles that unit (with clang++ where it is installed, else g++:
``cpp_pch.compiler``), links it with the binding object (compiled once per cache), and returns a
``CppModule`` subclass: a real ``nn.Module`` whose submodules are Python ``nn.Linear`` and
``nn.Embedding`` holding the C++ module's very tensors, so ``load_state_dict``, ``.to(dtype)`` and
earlier lessons' checks work.
Each class made here is recorded (``binding_built``): lesson 12's checks take nothing else.

Builds are cached by a hash of the unit, torch's version, the flags and the compiler
(``COURSE_CPP_CACHE``, else beside torch's own extensions): a source compiles once per cache, is
imported once per process.
Builds read torch's headers precompiled (``cpp_pch``): made by a learner's first build where
``COURSE_CPP_CACHE`` is not set; in grading, made by the grader only and read by kernels. The
binding object is made alike, by the first build that finds none (in grading: by the grader).
nbgrader's Python stub lines become a C++ comment and ``TORCH_CHECK_NOT_IMPLEMENTED`` (Python's
``NotImplementedError``), so an unwritten body compiles, as the Python lessons' stubs run. A new
build is tried once in a throwaway process (``cpp_probe``) before it is cached, so that a crash in
it is a named ``CppCrashed``, not a dead kernel.
"""

import hashlib
import inspect
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import time
import weakref
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import torch
from torch import nn

from autograder import cpp_binding, cpp_pch
from autograder.cpp_binding import BINDINGS, Argument
from autograder.cpp_probe import CppCrashed, Trial, import_library, run_bounded, start_trial, stop, try_build

CACHE_VARIABLE = "COURSE_CPP_CACHE"
LIMIT_VARIABLE = "COURSE_CPP_COMPILE_LIMIT_S"
DEFAULT_LIMIT_S = 300.0
FINISHED = "finished"  # the file a build leaves beside its library once the library is complete
EXTRA_CFLAGS: tuple[str, ...] = ()  # torch's defaults (no optimisation flag): the work is in ATen

STUB_COMMENT = "# YOUR CODE HERE"
STUB_RAISE = "raise NotImplementedError()"
CPP_STUB_COMMENT = "// YOUR CODE HERE"
CPP_STUB_RAISE = 'TORCH_CHECK_NOT_IMPLEMENTED(false, "not implemented yet");'


class CompilerMissing(RuntimeError):
    """No C++ toolchain here: the message says what to install."""


class CompileError(RuntimeError):
    """The learner's C++ did not compile: the message gives the first error and its line."""


# --------------------------------------------------------------------------- the source


def translate_stubs(source: str) -> str:
    """nbgrader's Python stub lines, inside C++, as a C++ comment and a NotImplementedError."""
    lines = []
    for line in source.split("\n"):
        indent, text = line[: len(line) - len(line.lstrip())], line.strip()
        if text == STUB_COMMENT:
            line = indent + CPP_STUB_COMMENT
        elif text == STUB_RAISE:
            line = indent + CPP_STUB_RAISE
        lines.append(line)
    return "\n".join(lines)


SOURCE_FILE = "your_cell.cpp"  # the name the compiler's messages give the learner's code
NAMESPACE = "course_"  # each part's namespace: course_<label>


@dataclass(frozen=True)
class Part:
    """One learner's module in a build: its ``label`` (a C++ namespace and the Python name the
    extension gives it), the ``binding`` it follows (a key of ``BINDINGS``), and its C++."""

    label: str
    binding: str
    source: str

    def __post_init__(self) -> None:
        if self.binding not in BINDINGS:
            raise ValueError(f"no binding for {self.binding!r}; lesson 12 binds {sorted(BINDINGS)}")
        if not re.fullmatch(r"[A-Za-z]\w*", self.label):
            raise ValueError(f"a part's label is a C++ name, got {self.label!r}")


def _hoisted(source: str) -> tuple[list[str], str]:
    """The ``#include`` lines of ``source`` (which must not land inside a namespace), and the source
    with each of them left as an empty line, so that line numbers do not move."""
    includes, lines = [], []
    for line in source.split("\n"):
        if line.strip().startswith("#include"):
            includes.append(line.strip())
            line = ""
        lines.append(line)
    return includes, "\n".join(lines)


UNIT_HEAD = ("#include <torch/torch.h>", "#include <cmath>", "#include <limits>", "#include <optional>")


def translation_unit(parts: list[Part]) -> str:
    """One C++ file: each part in its own namespace (``#line`` keeps the learner's own line numbers),
    then the lines that hand each part to the binding object (``cpp_binding.glue``), which gives
    Python one constructor per part, named by its label."""
    head = list(UNIT_HEAD)
    body = []
    for part in parts:
        includes, source = _hoisted(translate_stubs(part.source))
        head += includes
        body += [
            f"namespace {NAMESPACE}{part.label} {{",
            f'#line 1 "{part.label}/{SOURCE_FILE}"',
            source,
            "}",
        ]
    glue = cpp_binding.glue([(part.label, part.binding, f"{NAMESPACE}{part.label}::") for part in parts])
    return "\n".join(head + body) + "\n" + glue


def build_key(unit: str) -> str:
    """A hash of everything the build depends on: the file, torch's version, the flags, the
    compiler, the binding object it links."""
    digest = hashlib.sha256()
    for part in (
        unit,
        torch.__version__,
        " ".join(EXTRA_CFLAGS),
        cpp_pch.compiler_identity(),
        cpp_binding.folder_name(),
    ):
        digest.update(part.encode())
        digest.update(b"\0")
    return digest.hexdigest()[:20]


def build_name(unit: str) -> str:
    """The name of the build of ``unit``: its folder in a cache, its library, its Python module."""
    return f"course_{build_key(unit)}"


def cell_part(name: str, source: str) -> Part:
    """The one part an exercise cell ``compile_module(name, source)`` builds (its label is its binding)."""
    return Part(name, name, source)


def cache_roots() -> list[Path]:
    """Where builds are looked for, in order; new builds go to the first. ``COURSE_CPP_CACHE`` lists
    them (separated by ``os.pathsep``: a kernel's private folder, then a shared read-only cache that
    only the grader writes); without it, one folder beside torch's own JIT extensions."""
    configured = [Path(folder) for folder in os.environ.get(CACHE_VARIABLE, "").split(os.pathsep) if folder]
    if configured:
        return configured
    from torch.utils.cpp_extension import get_default_build_root

    return [Path(get_default_build_root()) / "transformer-course"]


def compile_limit_s() -> float:
    """The wall-clock seconds one build may take: ``COURSE_CPP_COMPILE_LIMIT_S``, else 300."""
    return float(os.environ.get(LIMIT_VARIABLE, "") or DEFAULT_LIMIT_S)


# --------------------------------------------------------------------------- the compiler


def missing_tools() -> list[str]:
    """What a build needs and this machine lacks: a C++ compiler, ninja, Python's headers."""
    missing = []
    if shutil.which(cpp_pch.compiler()) is None:
        missing.append("a C++ compiler (g++)")
    if shutil.which("ninja") is None:
        missing.append("ninja")
    if not (Path(sysconfig.get_paths()["include"]) / "Python.h").is_file():
        missing.append("Python's C headers (Python.h)")
    return missing


def explain_missing(missing: list[str]) -> str:
    return (
        f"Lesson 12 compiles C++, and this machine lacks {' and '.join(missing)}. On Debian or Ubuntu: "
        "sudo apt-get install g++ ninja-build python3-dev; on macOS: xcode-select --install and "
        "pip install ninja; with conda: conda install -c conda-forge cxx-compiler ninja. "
        "Then restart the kernel and run the notebook again."
    )


FIRST_ERROR = re.compile(
    r"^(?P<file>[^\s:]+):(?P<line>\d+):(?P<column>\d+): (?:fatal )?error: (?P<text>.*)$", re.M
)


def first_error(log: str, sources: dict[str, str]) -> str:
    """The compiler's first error as one message: which module, which line, the line itself
    (``sources``: label -> the learner's C++ as written)."""
    found = FIRST_ERROR.search(log)
    if found is None:
        tail = "\n".join(log.strip().splitlines()[-15:])
        return f"the C++ did not compile, and the compiler's output names no line:\n{tail}"
    where, number = found["file"], int(found["line"])
    name = where.removesuffix(f"/{SOURCE_FILE}")
    if name in sources:
        lines = sources[name].split("\n")
        code = lines[number - 1].strip() if 0 < number <= len(lines) else ""
        return (
            f"{name}: your C++ does not compile. The first error is at line {number} of the C++ source "
            f'(the line of r""" is line 1), column {found["column"]}:\n    {code}\n'
            f"error: {found['text']}"
        )
    return f"the course's binding code for {name} does not compile against your C++: {found['text']}"


_LOADED: dict[str, ModuleType] = {}
_NOTES: dict[str, str] = {}  # build key -> how the build was had, for the lesson to print


def finished_library(name: str) -> Path | None:
    """The library of build ``name`` where a finished build of it lies, in the first cache that has one."""
    for root in cache_roots():
        if (root / name / FINISHED).is_file() and (root / name / f"{name}.so").is_file():
            return root / name / f"{name}.so"
    return None


def build_library(name: str, unit: str, parts: list[Part], verbose: bool = False) -> Path:
    """Compile ``unit`` into the first cache and link it with the binding object, the compiler run
    under the compile-time limit (so that a runaway build ends, and ends with a message); the
    library's path, once a throwaway process has tried it. The build is made in a staging folder of
    this process's and renamed into place finished, so that two processes building the same unit
    (two test workers, two notebooks) never read each other's half-written library."""
    final = cache_roots()[0] / name
    folder = final.with_name(f".{name}-{os.getpid()}-{time.monotonic_ns()}")
    folder.mkdir(parents=True)
    (folder / "unit.cpp").write_text(unit)
    try:
        return published(_built(folder, name, unit, parts, verbose), final, name)
    finally:
        shutil.rmtree(folder, ignore_errors=True)  # gone once published; left by a failed build


def _built(folder: Path, name: str, unit: str, parts: list[Part], verbose: bool) -> Path:
    """``build_library``'s work in the staging ``folder``; the folder, finished."""
    made_here = not os.environ.get(CACHE_VARIABLE)  # a learner's machine; never a grading kernel
    limit, labels = compile_limit_s(), ", ".join(part.label for part in parts)
    # on a machine that grades too, a learner's build also reads the grader's header and binding
    grader = [folder for folder in [cpp_pch.machine_cache()] if folder is not None and made_here]
    roots = [*cache_roots(), *grader]
    new_header = made_here and cpp_pch.finished(roots, UNIT_HEAD, FINISHED) is None
    with ThreadPoolExecutor(1) as pool:  # a first build makes both at once, on two cores
        made = pool.submit(cpp_binding.for_build, roots, FINISHED, limit)
        pch = cpp_pch.for_build(roots, UNIT_HEAD, FINISHED, limit, made_here)
    try:
        binding = made.result()
    except subprocess.TimeoutExpired as error:
        raise CompileError(f"{labels}: the course's binding did not compile within {limit:.0f} s") from error
    except (RuntimeError, OSError) as error:
        raise CompileError(f"{labels}: {error}") from error
    if new_header and pch is not None:
        prune_old_headers(pch.parent, binding.parent)
    print(f"compiling {labels} in C++ ...", flush=True)
    trial_process = start_trial()  # it imports torch while the compiler runs
    try:
        finished = compile_and_link(folder, name, pch, binding, limit)
        if finished is None:
            raise CompileError(
                f"{labels}: the C++ did not compile within {limit:.0f} s, the limit for one build"
            )
        log, returncode = finished
        if verbose:
            print(log)
        if returncode != 0:
            raise CompileError(first_error(log, {part.label: part.source for part in parts}))
        (folder / f"{name}.o").unlink()  # in the library now: the cache keeps the library only
        library = folder / f"{name}.so"
        # tried before any kernel of a learner's imports it
        try_build(name, library, [trial(part) for part in parts], child=trial_process)
    finally:
        stop(trial_process)
    (folder / FINISHED).write_text(unit)
    return folder


def published(staging: Path, final: Path, name: str) -> Path:
    """``staging``, a finished build, renamed to ``final``; where another process finished the same
    build first, theirs is kept (it is the same unit). A folder there without its
    finished mark is what an interrupted build of the old layout left: it is replaced."""
    if final.is_dir() and not (final / FINISHED).is_file():
        shutil.rmtree(final, ignore_errors=True)
    try:
        os.rename(staging, final)
    except OSError:
        if not (final / FINISHED).is_file():
            raise
    return final / f"{name}.so"


def prune_old_headers(header_folder: Path, binding_folder: Path) -> None:
    """After a learner's new precompiled header (in ``header_folder``): remove from their cache the
    headers and binding objects that this installation can no longer use (``cpp_pch.prune``)."""
    cache = header_folder.parent
    removed = cpp_pch.prune(cache, [header_folder.name, binding_folder.name])
    if removed:
        print(f"(removed {len(removed)} older precompiled headers and objects from {cache})", flush=True)


def build_commands(folder: Path, name: str, pch: Path | None, binding: Path) -> list[list[str]]:
    """The compiler's two commands for the unit that waits in ``folder``: compile it (reading the
    precompiled header ``pch`` first when there is one; include guards skip the unit's own
    ``#include`` lines), then link it with the ``binding`` object into ``<name>.so``."""
    compiler = cpp_pch.compiler()
    pch_flags = cpp_pch.use_flags(pch) if pch is not None else []
    unit, objects = folder / "unit.cpp", folder / f"{name}.o"
    compile_unit = [compiler, f"-DTORCH_EXTENSION_NAME={name}", *cpp_pch.flags(), *EXTRA_CFLAGS, *pch_flags]
    instances = cpp_pch.linked(pch) if pch is not None else []  # after the objects that need them
    link = [compiler, str(objects), str(binding), *instances, "-shared", *cpp_pch.link_flags()]
    return [[*compile_unit, "-c", str(unit), "-o", str(objects)], [*link, "-o", str(folder / f"{name}.so")]]


def compile_and_link(
    folder: Path,
    name: str,
    pch: Path | None,
    binding: Path,
    limit_s: float,
    run: Callable[[list[list[str]], float], tuple[str, int] | None] | None = None,
) -> tuple[str, int] | None:
    """``build_commands`` run by ``run`` (default ``run_within``; the grader's trusted build runs
    them in a sandbox) within ``limit_s`` seconds, once more without the precompiled header where
    the compiler refused it (clang does, g++ reads the headers instead): the output and the exit
    status, or None past the limit."""
    run = run or run_within
    deadline = time.monotonic() + limit_s
    finished = run(build_commands(folder, name, pch, binding), limit_s)
    if pch is None or finished is None or finished[1] == 0 or not cpp_pch.refused(finished[0]):
        return finished
    return run(build_commands(folder, name, None, binding), deadline - time.monotonic())


def run_within(commands: list[list[str]], limit_s: float) -> tuple[str, int] | None:
    """Run ``commands`` one after the other until one fails, all within ``limit_s`` seconds: their
    output and the last exit status, or None past the limit (``run_bounded``)."""
    deadline, logs = time.monotonic() + limit_s, []
    for command in commands:
        finished = run_bounded(command, max(deadline - time.monotonic(), 0.01))
        if finished is None:
            return None
        logs.append(finished[0])
        if finished[1] != 0:
            return "".join(logs), finished[1]
    return "".join(logs), 0


def trial(part: Part) -> Trial:
    """What ``cpp_probe`` tries of a part: its class, and its binding's argument names."""
    binding = BINDINGS[part.binding]
    return Trial(part.label, tuple(a.name for a in binding.init), tuple(a.name for a in binding.forward))


def compile_parts(parts: list[Part], verbose: bool = False) -> ModuleType:
    """The extension module built from ``parts``, compiled at most once per cache and imported at
    most once per process; its attribute ``<label>`` is each part's C++ class. A finished build in
    any cache is imported as it is, so a cache may be read-only."""
    unit = translation_unit(parts)
    key = build_key(unit)
    if key in _LOADED:
        _NOTES[key] = "already imported in this process"
        return _LOADED[key]
    name = build_name(unit)
    start = time.perf_counter()
    library, how = finished_library(name), "loaded from the cache in {:.2f} s"
    if library is None:
        missing = missing_tools()
        if missing:
            raise CompilerMissing(explain_missing(missing))
        library, how = build_library(name, unit, parts, verbose), "compiled in {:.1f} s"
    module = import_library(name, library)
    _NOTES[key] = how.format(time.perf_counter() - start)
    if "compiled" in how:  # the learner sees how long the build took
        print(f"{', '.join(part.label for part in parts)}: {_NOTES[key]}", flush=True)
    _LOADED[key] = module
    return module


def build_note(parts: list[Part]) -> str:
    """How the build of ``parts`` was last had: compiled (how long), loaded from the cache, imported."""
    return _NOTES.get(build_key(translation_unit(parts)), "not built in this process")


# --------------------------------------------------------------------------- the Python side


def _cpp_kind(cpp_module: Any) -> str:
    """'torch::nn::LinearImpl' for a C++ nn::Linear: the name the C++ module gives itself."""
    return str(cpp_module)


def _shell(cpp_module: Any) -> nn.Module:
    """A Python module whose parameters are ``cpp_module``'s own tensors (the same objects)."""
    kind, parameters = _cpp_kind(cpp_module), dict(cpp_module._parameters.items())
    if kind == "torch::nn::LinearImpl":
        weight = parameters["weight"]
        shell = nn.Linear(weight.shape[1], weight.shape[0], bias="bias" in parameters, device="meta")
    elif kind == "torch::nn::EmbeddingImpl":
        shell = nn.Embedding(*parameters["weight"].shape, device="meta")
    else:
        return CppModule(cpp_module)
    _share(shell, cpp_module)
    return shell


def _share(module: nn.Module, cpp_module: Any) -> None:
    """Put the C++ module's own tensors and children into ``module`` (no copy: the same tensors)."""
    module._parameters.clear()
    module._parameters.update(cpp_module._parameters.items())
    module._buffers.clear()
    module._buffers.update(cpp_module._buffers.items())
    for name, child in cpp_module._modules.items():
        module._modules[name] = _shell(child)


class CppModule(nn.Module):
    """A C++ ``torch::nn::Module`` seen from Python as an ``nn.Module``: its parameters and buffers
    are the C++ module's tensors, each C++ submodule appears under its name (as ``nn.Linear`` or
    ``nn.Embedding`` when it is one), so weights load by name and ``.double()`` changes what C++
    computes with; ``forward`` runs the C++ forward, other bound members (``attn``) read through.
    ``calls``: the binding's handle of a learner's module (``cpp_binding``), whose ``forward`` and
    readable members call the learner's code; a submodule has none."""

    def __init__(self, cpp_module: Any, calls: Any = None):
        super().__init__()
        object.__setattr__(self, "cpp", cpp_module)
        object.__setattr__(self, "calls", cpp_module if calls is None else calls)
        _share(self, cpp_module)

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        return self.calls.forward(*args, **kwargs)

    def train(self, mode: bool = True) -> "CppModule":
        self.cpp.train(mode)
        return super().train(mode)

    def __getattr__(self, name: str) -> Any:
        try:
            return super().__getattr__(name)
        except AttributeError:
            if name.startswith("_") or name in ("cpp", "calls"):
                raise
            calls = self.__dict__["calls"]
            return getattr(calls if hasattr(calls, name) else self.__dict__["cpp"], name)

    def extra_repr(self) -> str:
        return f"C++ {_cpp_kind(self.cpp)}"

    @classmethod
    def built_binding(cls) -> str | None:
        """The binding this very class was built for by ``compile_module`` in this process, None when
        it was not (``binding_built``): how the judge asks the kernel, through its handle."""
        return binding_built(cls)


# each class compile_module (or compile_many) made -> (the binding it follows, its attributes as made)
_BUILT: "weakref.WeakKeyDictionary[type, tuple[str, dict[str, Any]]]" = weakref.WeakKeyDictionary()
_AS_WRITTEN = dict(vars(CppModule))  # CppModule's own attributes, as this module defines them


def _made(cls: type[CppModule], binding: str) -> type[CppModule]:
    """Record ``cls`` as made here for ``binding``, with its attributes as they are now."""
    _BUILT[cls] = (binding, dict(vars(cls)))
    return cls


def _unchanged(now: dict[str, Any], made: dict[str, Any]) -> bool:
    return now.keys() == made.keys() and all(now[name] is made[name] for name in made)


def binding_built(cls: object) -> str | None:
    """The binding (``"Embedding"``, ...) whose C++ ``cls`` runs, when ``cls`` is a class that
    ``compile_module`` or ``compile_many`` made in this process and nothing of it or of ``CppModule``
    was replaced since; None for anything else: a Python class, a subclass, a class made by hand
    over a library, one whose ``forward`` was swapped."""
    try:
        binding, made = _BUILT[cls]  # type: ignore[index]
    except (KeyError, TypeError):  # not made here, or not a class at all
        return None
    if not (_unchanged(dict(vars(cls)), made) and _unchanged(dict(vars(CppModule)), _AS_WRITTEN)):
        return None
    return binding


def python_class(extension: ModuleType, part: Part, note: str = "") -> type[CppModule]:
    """A Python class, named like the binding, whose instances are ``CppModule``s over the module
    that the part's constructor ``extension.<label>`` makes (``note``: how its build was had)."""
    make = getattr(extension, part.label)

    def construct(self: CppModule, *args: Any, **kwargs: Any) -> None:
        handle = make(*args, **kwargs)
        CppModule.__init__(self, handle.module, handle)

    construct.__signature__ = python_signature(BINDINGS[part.binding].init)  # type: ignore[attr-defined]
    doc = f"The C++ {part.binding}, compiled ({part.label})."
    made = type(part.binding, (CppModule,), {"__init__": construct, "__doc__": doc, "build_note": note})
    return _made(made, part.binding)


def python_signature(arguments: tuple[Argument, ...]) -> inspect.Signature:
    """How Python sees a bound constructor's or forward's arguments (``self`` first)."""
    defaults = {"0.0": 0.0, "py::none()": None}
    parameters = [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    for argument in arguments:
        default = inspect.Parameter.empty if argument.default is None else defaults[argument.default]
        parameters.append(
            inspect.Parameter(argument.name, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=default)
        )
    return inspect.Signature(parameters)


def compile_module(name: str, source: str, verbose: bool = False) -> type[CppModule]:
    """The learner's C++ ``<name>Impl`` compiled, as a Python class ``name`` (a ``CppModule``).

    ``name`` is one of ``BINDINGS`` ("Embedding", "PositionwiseFeedForward", "MultiHeadAttention").
    """
    part = cell_part(name, source)
    try:
        extension = compile_parts([part], verbose)
    except (CompileError, CompilerMissing, CppCrashed) as error:
        print(error, file=sys.stderr)  # in the cell, at once; the checks repeat it
        return unbuilt_class(part, error)
    return python_class(extension, part, build_note([part]))


def unbuilt_class(part: Part, error: Exception) -> type[CppModule]:
    """A class that stands where a build failed: constructing it raises the build's error again, so
    that every check of the exercise reports the compiler's message rather than a missing name."""

    def construct(self: CppModule, *args: Any, **kwargs: Any) -> None:
        raise type(error)(str(error))

    note = f"not built: {error}"
    made = type(part.binding, (CppModule,), {"__init__": construct, "__doc__": note, "build_note": note})
    return _made(made, part.binding)  # its checks report the build's error, as for any cell of its own


def compile_many(parts: list[Part], verbose: bool = False) -> dict[str, type[CppModule]]:
    """Several modules in one build (one compile): label -> Python class."""
    extension = compile_parts(parts, verbose)
    return {part.label: python_class(extension, part) for part in parts}


@dataclass(frozen=True)
class CppSource:
    """A C++ exercise as the reference package holds it: the binding's name and the C++ text (nothing
    compiles when it is made; ``cell`` writes the exercise cell, ``compile`` compiles it here)."""

    name: str
    source: str

    def cell(self, python_name: str) -> str:
        """The exercise cell: ``<python_name> = compile_module("<name>", r\"\"\"<C++>\"\"\")``."""
        if '"""' in self.source or "\\" in self.source:
            raise ValueError(f"{python_name}: the C++ text must not hold triple quotes or backslashes")
        return f'{python_name} = compile_module("{self.name}", r"""{self.source}""")'

    def compile(self, verbose: bool = False) -> type[CppModule]:
        return compile_module(self.name, self.source, verbose)
