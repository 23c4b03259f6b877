"""Lesson 12's C++ modules: compile a learner's LibTorch source and use it from Python.

``compile_module`` adds to a learner's ``torch::nn::Module`` (``struct EmbeddingImpl``) what the
learner does not write (the pybind11 binding, with the contract's arguments), compiles it with
``torch.utils.cpp_extension.load_inline``, and returns a ``CppModule`` subclass: a real
``nn.Module`` whose submodules are Python ``nn.Linear`` and ``nn.Embedding`` holding the C++
module's very tensors, so ``load_state_dict``, ``.to(dtype)`` and earlier lessons' checks work.
Each class made here is recorded (``binding_built``): lesson 12's checks take nothing else.

Builds are cached by a hash of the unit, torch's version and the flags (``COURSE_CPP_CACHE``, else
beside torch's own extensions): a source compiles once per cache, is imported once per process.
Builds read torch's headers precompiled (``cpp_pch``): made by a learner's first build where
``COURSE_CPP_CACHE`` is not set; in grading, made by the grader only and read by kernels.
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
import sys
import sysconfig
import time
import weakref
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import torch
from torch import nn

from autograder import cpp_pch
from autograder.cpp_probe import CppCrashed, Trial, import_library, run_bounded, try_build

CACHE_VARIABLE = "COURSE_CPP_CACHE"
LIMIT_VARIABLE = "COURSE_CPP_COMPILE_LIMIT_S"
DEFAULT_LIMIT_S = 300.0
FINISHED = "finished"  # the file a build leaves beside its library once the library is complete
EXTRA_CFLAGS: tuple[str, ...] = ()  # torch's defaults (no optimisation flag): the work is in ATen

STUB_COMMENT = "# YOUR CODE HERE"
STUB_RAISE = "raise NotImplementedError()"
CPP_STUB_COMMENT = "// YOUR CODE HERE"
CPP_STUB_RAISE = 'TORCH_CHECK_NOT_IMPLEMENTED(false, "not implemented yet");'


@dataclass(frozen=True)
class Argument:
    """One argument of a bound constructor or forward: its C++ type, its name, and its default as
    C++ (``"0.0"``; ``"py::none()"`` for an optional tensor) or None when it has none."""

    cpp_type: str
    name: str
    default: str | None = None

    def declaration(self) -> str:
        return f"{self.cpp_type} {self.name}"

    def py_arg(self) -> str:
        default = "" if self.default is None else f" = {self.default}"
        return f'py::arg("{self.name}"){default}'


@dataclass(frozen=True)
class Binding:
    """What the course binds of a learner's module ``<name>Impl``: its constructor's and forward's
    arguments (the contract's names), and C++ members Python may read (``attn``)."""

    name: str
    init: tuple[Argument, ...]
    forward: tuple[Argument, ...]
    readable: tuple[str, ...] = ()

    def source(self, namespace: str = "", python_name: str | None = None) -> str:
        """The pybind11 code: a class ``python_name`` (default: the binding's name) over
        ``std::shared_ptr<<namespace><name>Impl>``."""
        impl = f"{namespace}{self.name}Impl"
        init_types = ", ".join(arg.cpp_type for arg in self.init)
        init_args = "".join(f", {arg.py_arg()}" for arg in self.init)
        forward_params = ", ".join(arg.declaration() for arg in self.forward)
        forward_names = ", ".join(arg.name for arg in self.forward)
        forward_args = "".join(f", {arg.py_arg()}" for arg in self.forward)
        lines = [
            f"  py::class_<{impl}, torch::nn::Module, std::shared_ptr<{impl}>>"
            f'(m, "{python_name or self.name}")',
            f"      .def(py::init<{init_types}>(){init_args})",
            f'      .def("forward", []({impl}& self, {forward_params}) {{'
            f" return self.forward({forward_names}); }}{forward_args})",
        ]
        lines += [
            f'      .def_property_readonly("{member}", []({impl}& self) {{ return self.{member}; }})'
            for member in self.readable
        ]
        return "\n".join(lines) + ";"


TENSOR = "torch::Tensor"
OPTIONAL_TENSOR = "std::optional<torch::Tensor>"
BINDINGS = {
    "Embedding": Binding(
        "Embedding",
        (Argument("int64_t", "vocab_size"), Argument("int64_t", "d_model")),
        (Argument(TENSOR, "tokens"),),
    ),
    "PositionwiseFeedForward": Binding(
        "PositionwiseFeedForward",
        (Argument("int64_t", "d_model"), Argument("int64_t", "d_ff"), Argument("double", "dropout", "0.0")),
        (Argument(TENSOR, "x"),),
    ),
    "MultiHeadAttention": Binding(
        "MultiHeadAttention",
        (
            Argument("int64_t", "d_model"),
            Argument("int64_t", "n_heads"),
            Argument("double", "dropout", "0.0"),
        ),
        (
            Argument(TENSOR, "query"),
            Argument(TENSOR, "key"),
            Argument(TENSOR, "value"),
            Argument(OPTIONAL_TENSOR, "mask", "py::none()"),
        ),
        readable=("attn",),
    ),
}


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


UNIT_HEAD = ("#include <torch/extension.h>", "#include <cmath>", "#include <limits>", "#include <optional>")


def translation_unit(parts: list[Part]) -> str:
    """One C++ file: each part in its own namespace (``#line`` keeps the learner's own line numbers),
    then the bindings, one Python class per part, named by its label."""
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
    bindings = [BINDINGS[part.binding].source(f"{NAMESPACE}{part.label}::", part.label) for part in parts]
    tail = ['#line 1 "course_bindings.cpp"', "PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {", *bindings, "}"]
    return "\n".join(head + body + tail) + "\n"


def build_key(unit: str) -> str:
    """A hash of everything the build depends on: the file, torch's version, the flags, g++'s path."""
    digest = hashlib.sha256()
    for part in (unit, torch.__version__, " ".join(EXTRA_CFLAGS), shutil.which("c++") or ""):
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
    if shutil.which(os.environ.get("CXX", "c++")) is None:
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
    """Compile ``unit`` into the first cache, in a child process under the compile-time limit (so
    that a runaway build ends, and ends with a message); the library's path."""
    folder = cache_roots()[0] / name
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "unit.cpp").write_text(unit)
    made_here = not os.environ.get(CACHE_VARIABLE)  # a learner's machine; never a grading kernel
    pch = cpp_pch.for_build(cache_roots(), UNIT_HEAD, FINISHED, compile_limit_s(), made_here)
    command = [sys.executable, "-m", "autograder.libtorch", "build", str(folder), name]
    command += [f"--pch={pch}"] if pch is not None else []
    labels = ", ".join(part.label for part in parts)
    print(f"compiling {labels} in C++ ...", flush=True)
    limit = compile_limit_s()
    finished = run_bounded(command, limit)
    if finished is None:
        raise CompileError(f"{labels}: the C++ did not compile within {limit:.0f} s, the limit for one build")
    log, returncode = finished
    if verbose:
        print(log)
    if returncode != 0:
        raise CompileError(first_error(log, {part.label: part.source for part in parts}))
    library = folder / f"{name}.so"
    try_build(name, library, [trial(part) for part in parts])  # before any kernel of a learner's imports it
    (folder / FINISHED).write_text(unit)
    return library


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


def build_here(folder: Path, name: str, load: bool = True, pch: Path | None = None) -> None:
    """The child's work in ``build_library``: load_inline on the unit that waits in ``folder``.
    Without ``load`` the library is built (ninja, the compiler, the linker) and never imported:
    the grader's trusted build step (autograder/engine/cpp_cache.py) runs no code it compiled.
    ``pch``: a precompiled header (``cpp_pch``), read first; include guards skip the unit's own."""
    from torch.utils import cpp_extension

    pch_cflags = ["-include", str(pch), "-Winvalid-pch"] if pch is not None else []
    if not load:  # load_inline imports through this one function, after the build
        cpp_extension._import_module_from_library = lambda module, path, is_python_module: None
    cpp_extension.load_inline(
        name=name,
        cpp_sources=[(folder / "unit.cpp").read_text()],
        build_directory=str(folder),
        extra_cflags=[*EXTRA_CFLAGS, *pch_cflags],
        no_implicit_headers=True,
    )


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
    computes with; ``forward`` runs the C++ forward, other bound members (``attn``) read through."""

    def __init__(self, cpp_module: Any):
        super().__init__()
        object.__setattr__(self, "cpp", cpp_module)
        _share(self, cpp_module)

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        return self.cpp.forward(*args, **kwargs)

    def train(self, mode: bool = True) -> "CppModule":
        self.cpp.train(mode)
        return super().train(mode)

    def __getattr__(self, name: str) -> Any:
        try:
            return super().__getattr__(name)
        except AttributeError:
            if name.startswith("_") or name == "cpp":
                raise
            return getattr(self.__dict__["cpp"], name)

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
    """A Python class, named like the binding, whose instances are ``CppModule``s over the part's
    C++ class ``extension.<label>`` (``note``: how its build was had)."""
    cpp_class = getattr(extension, part.label)

    def construct(self: CppModule, *args: Any, **kwargs: Any) -> None:
        CppModule.__init__(self, cpp_class(*args, **kwargs))

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


def main(argv: list[str]) -> int:
    """``python -m autograder.libtorch build FOLDER NAME [--no-import] [--pch=HEADER]``: the child that
    ``build_library`` starts (which imports what it built), or the grader's trusted build step's
    (``--no-import``: build only); ``--pch``: the precompiled header to use."""
    options = argv[3:]
    pch = [option.removeprefix("--pch=") for option in options if option.startswith("--pch=")]
    if (
        argv[:1] != ["build"]
        or len(argv) < 3
        or len(pch) > 1
        or len(options) > len(pch) + ("--no-import" in options)
    ):
        print(
            "usage: python -m autograder.libtorch build FOLDER NAME [--no-import] [--pch=HEADER]",
            file=sys.stderr,
        )
        return 2
    try:
        build_here(Path(argv[1]), argv[2], "--no-import" not in options, Path(pch[0]) if pch else None)
    except RuntimeError as error:
        print(error)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
