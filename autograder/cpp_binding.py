"""Lesson 12's binding object: all the Python-facing C++ of a build, compiled once per cache.

A learner's build (``autograder/libtorch.py``) is two objects linked into one library. The first,
the same for every learner, is this module's: ``course_binding.o``, the pybind11 code that gives
Python each module kind's constructor, ``forward`` and readable members (``attn``) with the
contract's argument names. It is compiled once, from the course's own text and torch's headers
(``torch/extension.h``: Python and pybind11, the slow part of a compile), into a folder
``binding-<hash>/`` of a cache with a ``finished`` mark written last, as the precompiled header is.
The second is the learner's unit: their C++ (``torch/torch.h`` only, precompiled) and a few lines
this module generates (``glue``) that hand the binding plain functions with fixed signatures, one
set per part (``<Kind>Calls``: make, forward, a reader per readable member), and the library's
``PyInit_<name>``. The link then puts them together.

In Python, a part is a function named by its label that returns a handle: ``handle.module`` is the
learner's module as torch's ``torch::nn::Module`` class (its parameters, submodules, ``train``),
``handle.forward(...)`` and ``handle.attn`` call the learner's code, ``handle.train(mode)`` sets
the module's mode.
"""

import hashlib
import os
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import torch

from autograder import cpp_pch

OBJECT = "course_binding.o"
SOURCE = "course_binding.cpp"
GLUE_FILE = "course_bindings.cpp"  # the name compiler messages give the generated lines


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
    arguments (the contract's names), and the tensor members Python may read (``attn``)."""

    name: str
    init: tuple[Argument, ...]
    forward: tuple[Argument, ...]
    readable: tuple[str, ...] = ()

    def _signatures(self) -> tuple[str, str]:
        init = ", ".join(arg.declaration() for arg in self.init)
        forward = ", ".join(["torch::nn::Module& self", *(arg.declaration() for arg in self.forward)])
        return init, forward

    def calls(self) -> str:
        """The C++ struct of plain functions a learner's unit gives the binding for one part."""
        init, forward = self._signatures()
        lines = [
            f"struct {self.name}Calls {{",
            f"  std::shared_ptr<torch::nn::Module> (*make)({init});",
            f"  torch::Tensor (*forward)({forward});",
            *(f"  torch::Tensor (*{member})(torch::nn::Module& self);" for member in self.readable),
            "};",
        ]
        return "\n".join(lines)

    def glue(self, label: str, namespace: str) -> str:
        """The functions of part ``label`` over ``<namespace><name>Impl``, and its calls."""
        init, forward = self._signatures()
        init_names = ", ".join(arg.name for arg in self.init)
        forward_names = ", ".join(arg.name for arg in self.forward)
        functions = ["make", "forward", *self.readable]
        lines = [
            f"namespace course_glue_{label} {{",
            f"using Impl = {namespace}{self.name}Impl;",
            f"std::shared_ptr<torch::nn::Module> make({init}) {{",
            f"  return course_binding::construct<Impl>({init_names}); }}",
            f"torch::Tensor forward({forward}) {{",
            f"  return static_cast<Impl&>(self).forward({forward_names}); }}",
            *(
                f"torch::Tensor {member}(torch::nn::Module& self) {{\n"
                f"  return static_cast<Impl&>(self).{member}; }}"
                for member in self.readable
            ),
            f"const course_binding::{self.name}Calls calls{{{', '.join(functions)}}};",
            "}",
        ]
        return "\n".join(lines)

    def handle(self) -> str:
        """The pybind11 class of this kind's handles, and the function that makes a part's."""
        kind, forward = f"{self.name}Handle", ", ".join(arg.declaration() for arg in self.forward)
        forward_names = ", ".join(arg.name for arg in self.forward)
        init_names = ", ".join(arg.name for arg in self.init)
        lines = [
            f"struct {kind} {{ std::shared_ptr<torch::nn::Module> module; const {self.name}Calls* calls; }};",
            f"void bind_{kind}(py::module_& m) {{",
            f'  py::class_<{kind}>(m, "{kind}", py::module_local())',
            f'      .def_readonly("module", &{kind}::module)',
            f'      .def("train", []({kind}& self, bool mode) {{ self.module->train(mode); }},',
            '           py::arg("mode") = true)',
            f'      .def("forward", []({kind}& self, {forward}) {{',
            f"        return self.calls->forward(*self.module, {forward_names}); }}"
            + "".join(f", {arg.py_arg()}" for arg in self.forward)
            + ")",
            *(
                f'      .def_property_readonly("{member}", []({kind}& self) {{\n'
                f"        return self.calls->{member}(*self.module); }})"
                for member in self.readable
            ),
            "      ;",
            "}",
            f"void bind_{self.name}(py::module_& m, const char* label, const {self.name}Calls* calls) {{",
            f"  m.def(label, [calls]({', '.join(arg.declaration() for arg in self.init)}) {{",
            f"    return {kind}{{calls->make({init_names}), calls}}; }}"
            + "".join(f", {arg.py_arg()}" for arg in self.init)
            + ");",
            "}",
        ]
        return "\n".join(lines)


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

HIDDEN = '__attribute__((visibility("hidden")))'


def interface() -> str:
    """The declarations both objects compile: each kind's calls, a part, the table of parts (which
    the learner's unit defines and the binding reads), and how a module is constructed (as
    pybind11's ``py::init`` does: parentheses when they work, else braces)."""
    fields = "".join(f" const {name}Calls* {name} = nullptr;" for name in BINDINGS)
    lines = [
        "namespace course_binding {",
        *(binding.calls() for binding in BINDINGS.values()),
        f"struct Part {{ const char* label;{fields} }};",
        f"extern {HIDDEN} const Part parts[];",
        f"extern {HIDDEN} const int part_count;",
        "template <class C, class... A> std::shared_ptr<torch::nn::Module> construct(A... a) {",
        "  if constexpr (std::is_constructible_v<C, A...>) return std::shared_ptr<C>(new C(a...));",
        "  else return std::shared_ptr<C>(new C{a...}); }",
        "}",
        'extern "C" PyObject* PyInit_course_binding();',
    ]
    return "\n".join(lines)


def source() -> str:
    """The binding object's translation unit: the same text for every learner."""
    binds = "\n".join(f"    if (part.{name}) bind_{name}(m, part.label, part.{name});" for name in BINDINGS)
    lines = [
        "#include <torch/extension.h>",
        interface(),
        "namespace course_binding {",
        *(binding.handle() for binding in BINDINGS.values()),
        "}",
        "PYBIND11_MODULE(course_binding, m) {",
        *(f"  course_binding::bind_{binding.name}Handle(m);" for binding in BINDINGS.values()),
        "  for (int i = 0; i < course_binding::part_count; ++i) {",
        "    const course_binding::Part& part = course_binding::parts[i];",
        binds,
        "  }",
        "}",
    ]
    return "\n".join(lines) + "\n"


def glue(parts: Sequence[tuple[str, str, str]]) -> str:
    """The lines a learner's unit ends with: for each part (label, binding, namespace) its calls,
    then the table of parts and ``PyInit_<TORCH_EXTENSION_NAME>``, which starts the binding's
    module (``-DTORCH_EXTENSION_NAME`` names it, so the unit's text does not hold its own hash)."""
    entries = ", ".join(
        f'{{.label = "{label}", .{binding} = &course_glue_{label}::calls}}' for label, binding, _ in parts
    )
    lines = [
        f'#line 1 "{GLUE_FILE}"',
        "struct _object; typedef _object PyObject;",
        interface(),
        *(BINDINGS[binding].glue(label, namespace) for label, binding, namespace in parts),
        f"const course_binding::Part course_binding::parts[] = {{{entries}}};",  # hidden: as declared
        f"const int course_binding::part_count = {len(parts)};",
        "#define COURSE_JOIN_(a, b) a##b",
        "#define COURSE_JOIN(a, b) COURSE_JOIN_(a, b)",
        'extern "C" __attribute__((visibility("default")))',
        "PyObject* COURSE_JOIN(PyInit_, TORCH_EXTENSION_NAME)() {",
        "  return PyInit_course_binding(); }",
    ]
    return "\n".join(lines) + "\n"


def compile_command(unit: Path, output: Path) -> list[str]:
    """The compiler's command for the binding's unit (Python's headers included)."""
    command = [cpp_pch.compiler(), "-DTORCH_API_INCLUDE_EXTENSION_H", *cpp_pch.flags()]
    return [*command, "-c", str(unit), "-o", str(output)]


def folder_name() -> str:
    """The folder of the binding object for this text, this torch, these flags and this compiler."""
    digest = hashlib.sha256()
    for part in (source(), torch.__version__, " ".join(cpp_pch.flags()), cpp_pch.compiler_identity()):
        digest.update(part.encode())
        digest.update(b"\0")
    return f"binding-{digest.hexdigest()[:20]}"


def finished(roots: Sequence[Path], mark: str) -> Path | None:
    """The binding object in the first of ``roots`` that holds a finished one, or None."""
    for root in roots:
        folder = root / folder_name()
        if (folder / mark).is_file() and (folder / OBJECT).is_file():
            return folder / OBJECT
    return None


def build(folder: Path, mark: str, limit_s: float) -> Path:
    """Compile the binding into ``folder`` (made through a staging folder renamed into place, with
    its ``mark`` in it) within ``limit_s`` seconds; the object's path. Raises RuntimeError when the
    compiler fails, subprocess.TimeoutExpired past the limit."""
    staging = folder.with_name(f".{folder.name}-{os.getpid()}")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    (staging / SOURCE).write_text(source())
    try:
        command = compile_command(staging / SOURCE, staging / OBJECT)
        done = subprocess.run(command, capture_output=True, text=True, timeout=limit_s)
        if done.returncode != 0:
            raise RuntimeError(f"the course's binding did not compile: {done.stderr.strip()[-400:]}")
        cpp_pch.record(staging)
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
    return folder / OBJECT


def for_build(roots: Sequence[Path], mark: str, limit_s: float) -> Path:
    """The binding object a new build links: a finished one in ``roots``, else one made now in the
    first root (a learner's first build; a grading kernel's private folder when the grader made
    none), saying so. Raises RuntimeError or subprocess.TimeoutExpired when it cannot be made."""
    found = finished(roots, mark)
    if found is not None:
        return found
    folder = roots[0] / folder_name()
    folder.parent.mkdir(parents=True, exist_ok=True)
    with cpp_pch.locked(folder.with_name(f".{folder.name}.lock")):  # two first builds at once: one compiles
        found = finished(roots, mark)
        if found is not None:
            return found
        print(
            "The first C++ build here also compiles the course's Python binding once (about a minute, "
            f"in {folder}).",
            flush=True,
        )
        return build(folder, mark, limit_s)
