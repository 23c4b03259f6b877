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

from autograder.lessons import EXERCISES

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
CPP_EXERCISES = frozenset(EXERCISES["12_libtorch"])

COURSE_PACKAGES = ("solutions", "autograder")
MACHINERY_NAMES = {"get_ipython", "__builtins__", "__import__", "setattr", "delattr", "globals"}
MACHINERY_MODULES = {"builtins", "importlib", "IPython", "gc", "ctypes", "inspect"}


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
        if name in CPP_EXERCISES and not compiles_cpp(cell.source):
            found.append(Flag(name, "does not compile C++ with compile_module (a Python definition?)"))
    return found


def compiles_cpp(source: str) -> bool:
    """Whether a lesson-12 cell is what the lesson asks for: one assignment of
    ``compile_module("<module>", "<C++>")``, both arguments string literals."""
    try:
        body = ast.parse(source).body
    except SyntaxError:
        return True  # the cell does not run at all; the grades say so
    if len(body) != 1 or not isinstance(body[0], ast.Assign) or not isinstance(body[0].value, ast.Call):
        return False
    call = body[0].value
    literal = [isinstance(arg, ast.Constant) and isinstance(arg.value, str) for arg in call.args]
    return isinstance(call.func, ast.Name) and call.func.id == "compile_module" and literal == [True, True]


def _parse(source: str) -> ast.AST:
    try:
        return ast.parse(source)
    except SyntaxError:
        return ast.Module(body=[], type_ignores=[])
