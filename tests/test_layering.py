"""The package's layers, read from its imports (every import, also those inside functions).

- the grading engine (``autograder.engine``) never imports the authoring tools, nor the
  instructor's floor above it (``autograder.instructor``: grades after late work, exports,
  insights), which imports the engine;
- the checks and the hidden tests never import the engine or the authoring tools, and the
  checks never import the reference package (they must hold for any learner's code);
- what a learner's notebook imports at run time (the checks, the hidden tests, ``capstone``,
  ``timing``) never imports the engine or the authoring tools;
- no module imports itself through others (no cycle), and none reaches into another module's
  private names.
"""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "autograder"


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules() -> dict[str, Path]:
    return {
        _module_name(path): path for path in PACKAGE.rglob("*.py") if "sample_submissions" not in path.parts
    }


MODULES = _modules()


def _resolve(name: str) -> str | None:
    """The course module that ``name`` (a module or a name in one) is, or None outside the course."""
    while name:
        if name in MODULES:
            return name
        name = name.rpartition(".")[0]
    return None


def _imports(module: str) -> dict[str, list[tuple[str, int]]]:
    """module -> [(the name imported from it, line)], for every import in ``module``'s file."""
    path = MODULES[module]
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: dict[str, list[tuple[str, int]]] = {}
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if (target := _resolve(alias.name)) is not None:
                    found.setdefault(target, []).append(("", node.lineno))
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(
                    [*package.split(".")[: len(package.split(".")) - node.level + 1], base]
                ).strip(".")
            for alias in node.names:
                # `from autograder.engine import judge` imports the module autograder.engine.judge
                target = (
                    _resolve(f"{base}.{alias.name}") if f"{base}.{alias.name}" in MODULES else _resolve(base)
                )
                if target is not None:
                    name = "" if f"{base}.{alias.name}" in MODULES else alias.name
                    found.setdefault(target, []).append((name, node.lineno))
    found.pop(module, None)
    return found


GRAPH = {module: _imports(module) for module in MODULES}


def _in(module: str, *packages: str) -> bool:
    return any(module == p or module.startswith(p + ".") for p in packages)


LEARNER_RUNTIME = (
    "autograder.checks",
    "autograder.hidden",
    "autograder.capstone",
    "autograder.timing",
    "autograder.libtorch",
)
RULES = [
    ("autograder.engine", ("autograder.authoring", "autograder.instructor")),
    ("autograder.checks", ("autograder.engine", "autograder.authoring", "solutions")),
    ("autograder.hidden", ("autograder.engine", "autograder.authoring")),
    *[(runtime, ("autograder.engine", "autograder.authoring")) for runtime in LEARNER_RUNTIME[2:]],
]


def _all_imports(module: str) -> set[str]:
    """Every top-level name ``module`` imports, course modules or not (for the ``solutions`` rule)."""
    names = set()
    for node in ast.walk(ast.parse(MODULES[module].read_text())):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            names.add(node.module)
    return names


def _crossings(layer: str, forbidden: tuple[str, ...]) -> list[str]:
    return [
        f"{module} imports {name}"
        for module in MODULES
        if _in(module, layer)
        for name in sorted(_all_imports(module))
        if _in(name, *forbidden)
    ]


@pytest.mark.parametrize("layer, forbidden", RULES, ids=[layer for layer, _ in RULES])
def test_a_layer_imports_nothing_above_it(layer, forbidden):
    assert _crossings(layer, forbidden) == []


def test_a_crossing_would_be_found():
    """The pipeline grades through submission, and the capstone trains with the reference."""
    assert "autograder.engine.pipeline imports autograder.engine.submission" in _crossings(
        "autograder.engine.pipeline", ("autograder.engine.submission",)
    )
    assert "autograder.capstone imports solutions" in _crossings("autograder.capstone", ("solutions",))
    assert "autograder.instructor.grades imports autograder.engine.pipeline" in _crossings(
        "autograder.instructor.grades", ("autograder.engine",)
    )


def _cycles() -> list[list[str]]:
    """The import graph's strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        for target in GRAPH[module]:
            if target not in index:
                visit(target)
                low[module] = min(low[module], low[target])
            elif target in stack:
                low[module] = min(low[module], index[target])
        if low[module] == index[module]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == module:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for module in sorted(GRAPH):
        if module not in index:
            visit(module)
    return found


def test_no_module_imports_itself_through_others():
    assert _cycles() == []


def test_a_cycle_would_be_found():
    GRAPH["autograder.engine.submission"]["autograder.engine.pipeline"] = [("", 0)]
    try:
        [cycle] = _cycles()
        assert {"autograder.engine.pipeline", "autograder.engine.submission"} <= set(cycle)
    finally:
        del GRAPH["autograder.engine.submission"]["autograder.engine.pipeline"]


def test_no_module_imports_another_modules_private_names():
    reaches = [
        f"{module}:{line} imports {target}.{name}"
        for module, targets in GRAPH.items()
        for target, names in targets.items()
        for name, line in names
        if name.startswith("_") and not name.startswith("__")
    ]
    assert reaches == []


# Every module of ours, the tests included: a name with one leading underscore is its module's own.
OURS = {
    _module_name(path): path
    for folder in ("autograder", "tests", "solutions")
    for path in (ROOT / folder).rglob("*.py")
    if "sample_submissions" not in path.parts and "lesson_scripts" not in path.parts
}


def _is_private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _dotted(node: ast.expr) -> str | None:
    """`a.b.c` for the expression a.b.c, None for anything else (a call, a subscript)."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute) and (base := _dotted(node.value)) is not None:
        return f"{base}.{node.attr}"
    return None


def private_reaches(module: str, source: str, package: str) -> list[tuple[int, str]]:
    """(line, module.name) for each private name of another of our modules that ``source``
    imports (`from m import _name`) or reads as an attribute of a module it imported
    (`m._name`, `a.b.m._name`); ``package`` is where its relative imports start."""
    tree = ast.parse(source)
    modules: dict[str, str] = {}  # a name bound by an import -> the module of ours it is
    reaches = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                bound = alias.asname or alias.name.partition(".")[0]
                if (target := alias.name if alias.asname else bound) in OURS:
                    modules[bound] = target
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                base = ".".join([*parts[: len(parts) - node.level + 1], base]).strip(".")
            for alias in node.names:
                if f"{base}.{alias.name}" in OURS:
                    modules[alias.asname or alias.name] = f"{base}.{alias.name}"
                elif base in OURS and base != module and _is_private(alias.name):
                    reaches.append((node.lineno, f"{base}.{alias.name}"))
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and _is_private(node.attr):
            head, _, rest = (_dotted(node.value) or "").partition(".")
            target = ".".join(filter(None, [modules.get(head), rest]))
            if head in modules and target in OURS and target != module:
                reaches.append((node.lineno, f"{target}.{node.attr}"))
    return sorted(reaches)


def _all_private_reaches() -> list[tuple[str, int, str]]:
    found = []
    for module, path in OURS.items():
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        found += [(module, line, name) for line, name in private_reaches(module, path.read_text(), package)]
    return found


def test_no_module_reaches_another_modules_private_names():
    found = _all_private_reaches()
    assert [f"{module}:{line} reaches {name}" for module, line, name in found] == []


@pytest.mark.parametrize(
    "source",
    [
        "from autograder.engine import submission_files\nsubmission_files._copy_data",
        "import autograder.engine.submission_files as files\nfiles._copy_data",
        "import autograder.engine.submission_files\nautograder.engine.submission_files._copy_data",
        "import autograder\nautograder.engine.submission_files._copy_data",
        "from .engine import submission_files\nsubmission_files._copy_data",
        "from autograder.engine.submission_files import _copy_data",
    ],
)
def test_a_reach_into_private_names_would_be_found(source):
    assert private_reaches("autograder.grading", source, "autograder") == [
        (2 if "\n" in source else 1, "autograder.engine.submission_files._copy_data")
    ]


@pytest.mark.parametrize(
    "source",
    [
        "import os\nos._exit",  # not ours
        "from autograder.engine import submission_files\nsubmission_files.__name__",  # a dunder
        "from autograder.engine import submission_files\nsubmission_files.Caps",  # public
        "from autograder.engine.submission_files import Caps\nCaps._fields",  # a class, not a module
        "import autograder.grading\nautograder.grading._source",  # its own
    ],
)
def test_what_is_not_a_reach(source):
    assert private_reaches("autograder.grading", source, "autograder") == []


# One test split over two files, so that make test's workers share its cases.
SPLIT_TESTS = {("tests.test_honest_flags_half", "tests.test_honest_flags")}


def imported_test_files(source: str) -> set[str]:
    """The test files (tests.test_*) that ``source`` imports; what test files share lives in
    public modules instead (tests/helpers.py, hostile_class.py, alternatives/, ...)."""
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            found |= {node.module, *(f"{node.module}.{alias.name}" for alias in node.names)}
    return {name for name in found if name.startswith("tests.test_") and name in OURS}


def test_test_files_share_helpers_through_public_modules():
    found = {
        (module, imported)
        for module, path in OURS.items()
        if module.startswith("tests.")
        for imported in imported_test_files(path.read_text())
        if imported != module
    }
    assert found == SPLIT_TESTS


def test_a_test_file_imported_by_another_would_be_found():
    assert imported_test_files("from tests.test_mutations import CHECKS") == {"tests.test_mutations"}
    assert imported_test_files("from tests import test_honest_flags as honest") == {"tests.test_honest_flags"}
    assert imported_test_files("from tests.helpers import CHECKS\nfrom tests import alternatives") == set()
