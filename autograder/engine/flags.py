"""Shortcuts in a submission, found by reading its code (never by running it).

A learner's cells are read as Python syntax trees and flagged to the instructor for:
reaching the reference package or the grading code (`solutions`, `autograder`), calling
the PyTorch building block that the exercise rebuilds (`OFF_LIMITS`, the contract's list),
and touching the kernel's machinery (`sys.modules`, IPython's hooks, `builtins`, or
assigning to an attribute of an imported module, as in `torch.allclose = ...`). A flag
costs no points by itself; the instructor reads it beside the grades.
"""

import ast
import re
from dataclasses import dataclass

import nbformat

from autograder.lessons import CPP_EXERCISES

# exercise -> names of PyTorch's own versions of it (as attributes: `F.layer_norm`, `nn.LayerNorm`)
OFF_LIMITS: dict[str, tuple[str, ...]] = {
    "Embedding": (),
    "sinusoidal_encoding": (),
    "PositionalEncoding": (),
    "scaled_dot_product_attention": (
        "scaled_dot_product_attention",
        "MultiheadAttention",
        "multi_head_attention_forward",
    ),
    "causal_mask": ("generate_square_subsequent_mask",),
    "padding_mask": (),
    "decoder_mask": ("generate_square_subsequent_mask",),
    "split_heads": (),
    "merge_heads": (),
    "MultiHeadAttention": ("MultiheadAttention", "multi_head_attention_forward"),
    "LayerNorm": ("LayerNorm", "layer_norm"),
    "PositionwiseFeedForward": (),
    "EncoderLayer": ("TransformerEncoderLayer", "MultiheadAttention"),
    "DecoderLayer": ("TransformerDecoderLayer", "MultiheadAttention"),
    "Encoder": ("TransformerEncoder", "TransformerEncoderLayer"),
    "Decoder": ("TransformerDecoder", "TransformerDecoderLayer"),
    "Generator": (),
    "Transformer": ("Transformer", "TransformerEncoder", "TransformerDecoder"),
    "greedy_decode": (),
    "make_batch": (),
    "sequence_loss": ("cross_entropy", "nll_loss"),
    "rate": (),
    "train_step": (),
    "train_loop": (),
    "exact_match": (),
    "decoder_layer_step": (),
    "cached_greedy_decode": (),
    "blockwise_attention": ("scaled_dot_product_attention",),
    # lesson 12: C++ inside the cell's string, found where it is named with `::` (nn::MultiheadAttention)
    "CppEmbedding": (),
    "CppPositionwiseFeedForward": (),
    "CppMultiHeadAttention": ("MultiheadAttention", "multi_head_attention_forward"),
}
# lesson 12's exercises are C++, compiled by the cell: ``Name = compile_module("<module>", r"""...""")``

COURSE_PACKAGES = ("solutions", "autograder")
MACHINERY_NAMES = {"get_ipython", "__builtins__", "__import__", "setattr", "delattr", "globals"}
MACHINERY_MODULES = {"builtins", "importlib", "IPython", "gc", "ctypes", "inspect"}
# How code reads its callers' frames and the globals of functions it is given: the way to the
# checks' own state while they run (`sys._getframe(1).f_locals`, `fn.__globals__`)
FRAME_ATTRIBUTES = {
    "_getframe",
    "f_back",
    "f_locals",
    "f_globals",
    "tb_frame",
    "gi_frame",
    "cr_frame",
    "__globals__",
    "__closure__",
}


@dataclass(frozen=True)
class Flag:
    cell: str  # the cell's grade_id, or "cell <n>" for a cell the learner added
    reason: str


def _module_names(tree: ast.AST) -> set[str]:
    """Names that modules are bound to in this code (`import torch.nn.functional as F` -> F)."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {alias.asname or alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            names |= {alias.asname or alias.name for alias in node.names}
    return names


def _imported(node: ast.AST) -> tuple[list[str], list[str]]:
    """The modules an import statement reads, and the names it takes from them."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names], []
    if isinstance(node, ast.ImportFrom) and node.module:
        return [node.module], [f"{node.module}.{alias.name}" for alias in node.names]
    return [], []


def shortcuts_in(source: str, off_limits: tuple[str, ...], modules: set[str]) -> list[str]:
    """The reasons to flag one cell's code (empty when there are none)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []  # the cell does not run at all; the grades say so
    reasons: list[str] = []
    for node in ast.walk(tree):
        read, taken = _imported(node)
        for module in read:
            top = module.split(".")[0]
            if top in COURSE_PACKAGES:
                reasons.append(f"imports {module} (the course's reference or grading code)")
            elif top in MACHINERY_MODULES:
                reasons.append(f"imports {module} (the kernel's machinery)")
        for name in read + taken:
            if name.split(".")[0] not in COURSE_PACKAGES and name.split(".")[-1] in off_limits:
                reasons.append(f"imports {name}, which this exercise rebuilds")
        if isinstance(node, ast.Attribute) and node.attr in off_limits:
            reasons.append(f"uses .{node.attr}, which this exercise rebuilds")
        if isinstance(node, ast.Attribute) and node.attr == "modules":
            if isinstance(node.value, ast.Name) and node.value.id == "sys":
                reasons.append("uses sys.modules (the kernel's machinery)")
        if isinstance(node, ast.Attribute) and node.attr in FRAME_ATTRIBUTES:
            reasons.append(f"uses .{node.attr} (reads the frames or globals of the code calling it)")
        if isinstance(node, ast.Name) and node.id in MACHINERY_NAMES:
            reasons.append(f"uses {node.id} (the kernel's machinery)")
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            if any(f"{package}/" in node.value or f"{package}." in node.value for package in COURSE_PACKAGES):
                reasons.append(f"names the course's code in a string ({node.value[:60]!r})")
            for name in off_limits:
                if re.search(rf"::\s*{name}\b", node.value):
                    reasons.append(f"uses {name} in its C++, which this exercise rebuilds")
        targets = node.targets if isinstance(node, ast.Assign) else []
        if isinstance(node, ast.AugAssign | ast.AnnAssign | ast.Delete):
            targets = node.targets if isinstance(node, ast.Delete) else [node.target]
        for target in targets:
            base = target
            while isinstance(base, ast.Attribute):
                base = base.value
            if isinstance(target, ast.Attribute) and isinstance(base, ast.Name) and base.id in modules:
                reasons.append(f"changes {ast.unparse(target)}, an attribute of an imported module")
    return list(dict.fromkeys(reasons))  # each reason once, in order


def flags(nb: nbformat.NotebookNode) -> list[Flag]:
    """Flags for a learner's notebook: its solution cells and the cells the learner added."""
    code = [cell for cell in nb.cells if cell.cell_type == "code"]
    modules = set().union(*(_module_names(_parse(cell.source)) for cell in code)) | {"torch", "F", "nn"}
    found = []
    for index, cell in enumerate(nb.cells):
        meta = cell.metadata.get("nbgrader", {})
        if cell.cell_type != "code" or (meta and not meta.get("solution")):
            continue  # the instructor's locked cells import what the lesson needs
        name = meta.get("grade_id") or f"cell {index + 1} (added by the learner)"
        for reason in shortcuts_in(cell.source, OFF_LIMITS.get(meta.get("grade_id", ""), ()), modules):
            found.append(Flag(name, reason))
        found += [Flag(name, reason) for reason in cpp_reasons(name, cell.source)]
    return found


# lesson 12's exercise cell, as CppSource.cell (autograder/libtorch.py) writes it
CPP_SHAPE = 'one assignment {} = compile_module("{}", r"""<C++>""")'


@dataclass(frozen=True)
class CppCell:
    """A lesson-12 exercise cell as the lesson asks for it: which exercise it assigns, the binding
    it names (``Embedding`` for ``CppEmbedding``) and the C++ text."""

    exercise: str
    binding: str
    source: str


def binding_of(exercise: str) -> str:
    """The C++ module a lesson-12 exercise compiles: ``Embedding`` for ``CppEmbedding``."""
    return exercise.removeprefix("Cpp")


def cpp_cell(source: str) -> CppCell | None:
    """The one reading of lesson 12's cell shape (the flags and the grader's C++ prebuild use it):
    a ``CppCell`` when ``source`` is exactly one assignment ``<exercise> = compile_module(
    "<binding>", <C++>)``, the exercise one of lesson 12's, the binding its own, both arguments
    string literals, and at most the keyword ``verbose=True`` or ``verbose=False``; None otherwise."""
    body = _parse(source).body
    if len(body) != 1 or not isinstance(body[0], ast.Assign) or len(body[0].targets) != 1:
        return None
    target, call = body[0].targets[0], body[0].value
    if not (isinstance(target, ast.Name) and target.id in CPP_EXERCISES and isinstance(call, ast.Call)):
        return None
    named = isinstance(call.func, ast.Name) and call.func.id == "compile_module"
    texts = [arg.value for arg in call.args if isinstance(arg, ast.Constant) and isinstance(arg.value, str)]
    verbose_only = all(
        keyword.arg == "verbose"
        and isinstance(keyword.value, ast.Constant)
        and type(keyword.value.value) is bool
        for keyword in call.keywords
    )
    if not (
        named and verbose_only and len(call.args) == len(texts) == 2 and texts[0] == binding_of(target.id)
    ):
        return None
    return CppCell(target.id, texts[0], texts[1])


def cpp_reasons(cell: str, source: str) -> list[str]:
    """Why lesson 12's rules flag the learner's cell ``cell`` (a grade id, or "cell <n> ..." for an
    added cell): an exercise cell not in the lesson's shape, or an exercise's name bound elsewhere."""
    reasons = []
    if cell in CPP_EXERCISES and _runs(source):
        written = cpp_cell(source)
        if written is None or written.exercise != cell:
            reasons.append(f"does not compile C++ with {CPP_SHAPE.format(cell, binding_of(cell))}")
    for exercise in sorted(cpp_names_bound(source) - {cell}):
        reasons.append(f"binds {exercise} outside its exercise cell, where lesson 12 asks for C++")
    return reasons


def cpp_names_bound(source: str) -> set[str]:
    """Lesson 12's exercise names that ``source`` binds anywhere (assigns, defines, imports,
    deletes, or declares global)."""
    bound = set()
    for node in ast.walk(_parse(source)):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store | ast.Del):
            bound.add(node.id)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            bound.add(node.name)
        elif isinstance(node, ast.Import | ast.ImportFrom):
            bound |= {alias.asname or alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.Global | ast.Nonlocal):
            bound |= set(node.names)
    return bound & CPP_EXERCISES


def _runs(source: str) -> bool:
    """Whether ``source`` is Python at all (a cell that is not does not run; the grades say so)."""
    try:
        ast.parse(source)
    except SyntaxError:
        return False
    return True


def _parse(source: str) -> ast.AST:
    try:
        return ast.parse(source)
    except SyntaxError:
        return ast.Module(body=[], type_ignores=[])
