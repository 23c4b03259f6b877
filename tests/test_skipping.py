"""Grading skips a lesson's experiment cells (figures, timings): proof that this changes no
score and no test cell's output.

A test cell's outcome can depend on the learner's exercise, the checks, and the kernel's state.
1. Experiment cells bind no name that a later cell that still runs reads (test cells, exercise
   cells, other code), set no global option, and assign no attribute of anything they did not
   make; so skipping them changes nothing a later cell finds by name.
2. The one shared state they do change, torch's global random generator, does not reach any test
   cell: for the reference, every catalogued mistake and the stub, each test cell prints the same
   and passes or fails with the same message after two different global seeds.
tests/test_pipeline.py then grades every sample submission with skipping on, and expects each
cell's score exactly as it was without.
"""

import ast
import contextlib
import io

import nbformat
import pytest
import torch

from autograder import grading, lessons
from autograder.checks import CheckFailure
from tests.helpers import CATALOGUE, CPP_EXERCISES, buggy, reference_of, stub

GLOBAL_SETTERS = {
    "set_default_dtype",
    "set_default_device",
    "set_grad_enabled",
    "set_num_threads",
    "use_deterministic_algorithms",
    "set_printoptions",
    "set_flush_denormal",
}


def _bound(tree: ast.AST) -> set[str]:
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store | ast.Del):
            names.add(node.id)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Import | ast.ImportFrom):
            names.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
    return names


def _read(node: ast.AST, local: frozenset[str] = frozenset()) -> set[str]:
    """The names ``node`` reads from the kernel's globals: every name loaded, but in a function
    the names it binds itself (its parameters, its own assignments), which shadow the globals."""
    if isinstance(node, ast.Name):
        return {node.id} if isinstance(node.ctx, ast.Load) and node.id not in local else set()
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
        arguments = node.args
        parameters = [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs]
        parameters += [arg for arg in (arguments.vararg, arguments.kwarg) if arg is not None]
        body = node.body if isinstance(node.body, list) else [node.body]
        own = {arg.arg for arg in parameters} | {name for statement in body for name in _bound(statement)}
        # decorators and defaults are read where the function is defined
        outer = [
            *getattr(node, "decorator_list", []),
            *arguments.defaults,
            *filter(None, arguments.kw_defaults),
        ]
        found = {name for part in outer for name in _read(part, local)}
        return found | {name for statement in body for name in _read(statement, local | own)}
    return {name for child in ast.iter_child_nodes(node) for name in _read(child, local)}


def test_a_functions_own_names_shadow_the_globals_but_not_others():
    cell = ast.parse("def attend(q, k):\n    scores = q @ k\n    return scores + bias\n")
    assert _read(cell) == {"bias"}
    assert _read(ast.parse("print(q)")) == {"print", "q"}


def _outside_effects(tree: ast.AST, own: set[str]) -> list[str]:
    """Global setters called, and attributes or items assigned on names the cell did not bind."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            if node.func.attr in GLOBAL_SETTERS:
                found.append(f"calls {node.func.attr}")
        targets = node.targets if isinstance(node, ast.Assign) else [getattr(node, "target", None)]
        for target in targets:
            base = target
            while isinstance(base, ast.Attribute | ast.Subscript):
                base = base.value
            if base is not target and isinstance(base, ast.Name) and base.id not in own:
                found.append(f"assigns into {base.id}")
    return found


@pytest.mark.parametrize("lesson", lessons.written_lessons())
def test_experiment_cells_bind_nothing_a_later_cell_reads(lesson):
    nb = nbformat.read(lessons.source_path(lesson), as_version=4)
    skipped = grading.experiments(lesson)
    assert skipped, f"{lesson} marks no experiment cell"
    code = [cell for cell in nb.cells if cell.cell_type == "code"]
    for index, cell in enumerate(code):
        if cell.metadata.nbgrader["grade_id"] not in skipped:
            continue
        assert not grading.is_test_cell(cell) and not cell.metadata.nbgrader.get("solution")
        tree = ast.parse(cell.source)
        bound = _bound(tree)
        kept_later = [c for c in code[index + 1 :] if c.metadata.nbgrader["grade_id"] not in skipped]
        for later in kept_later:
            shared = bound & _read(ast.parse(later.source))
            assert not shared, (
                f"{lesson}: {later.metadata.nbgrader['grade_id']} reads {shared} from a skipped cell"
            )
        assert not _outside_effects(tree, bound), (
            cell.metadata.nbgrader["grade_id"],
            _outside_effects(tree, bound),
        )


def _outcome(test: grading.GradedTest, implementation) -> tuple[str, str]:
    """What the whole test cell prints, and how it ends ('' when it passes)."""
    printed = io.StringIO()
    try:
        with contextlib.redirect_stdout(printed):
            for part in (test.visible, test.hidden):
                if part:
                    grading.run(test, part, implementation)
    except CheckFailure as failure:
        return printed.getvalue(), f"CheckFailure: {failure}"
    return printed.getvalue(), ""


def _implementations(exercise: str) -> list:
    if exercise in CPP_EXERCISES:  # lesson 12: the reference, the stub and each mistake, compiled from C++
        from tests.alternatives import libtorch as cpp_variants

        return [cls for (owner, _), cls in cpp_variants.compiled().items() if owner == exercise]
    return [
        reference_of(exercise),
        stub(exercise),
        *(buggy(exercise, mistake) for mistake in CATALOGUE[exercise]),
    ]


TESTS = [test for lesson in lessons.written_lessons() for test in grading.table(lesson)]


@pytest.mark.parametrize("test", TESTS, ids=[test.grade_id for test in TESTS])
def test_no_test_cell_depends_on_the_global_random_state(test, monkeypatch):
    monkeypatch.setenv("COURSE_HIDDEN_SEED", "1234")  # the hidden tests' own inputs, fixed for both runs
    for implementation in _implementations(test.exercise):
        outcomes = []
        for seed in (0, 1):
            torch.manual_seed(seed)
            outcomes.append(_outcome(test, implementation))
        assert outcomes[0] == outcomes[1], (implementation, outcomes)
