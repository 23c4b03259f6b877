"""docs/contract.md and the reference package say the same thing.

The contract's tables give, per lesson, each exercise's definition and (for classes) its
methods, as call signatures in backticks. Every signature must be exactly the reference's:
the same parameter names, in the same order, with the same defaults.
"""

import inspect
import re
import subprocess

import pytest

import solutions
from autograder import lessons
from autograder.libtorch import BINDINGS, CppSource, python_signature
from solutions import libtorch as cpp_reference

CONTRACT = lessons.ROOT / "docs" / "contract.md"
SIGNATURE = re.compile(r"`(?P<name>\w+)\((?P<params>[^`]*)\)`")


def _tables() -> dict[str, list[list[str]]]:
    """'### <lesson>: ...' headings -> the rows of the table under each (cells as text)."""
    tables: dict[str, list[list[str]]] = {}
    lesson = None
    for line in CONTRACT.read_text().splitlines():
        if line.startswith("### "):
            lesson = line[4:].split(":")[0]
            tables[lesson] = []
        elif line.startswith("## "):
            lesson = None  # a new section: its tables are not the exercises' signatures
        elif lesson and line.startswith("| `"):
            tables[lesson].append([cell.strip() for cell in line.strip("|").split("|")])
    return tables


def _written(fn, name: str, skip_self: bool) -> str:
    """The signature as the contract writes it: name(a, b, c=default), strings in double quotes."""
    params = list(inspect.signature(fn).parameters.values())[int(skip_self) :]

    def one(param: inspect.Parameter) -> str:
        if param.default is inspect.Parameter.empty:
            return param.name
        default = f'"{param.default}"' if isinstance(param.default, str) else repr(param.default)
        return f"{param.name}={default}"

    return f"{name}({', '.join(one(p) for p in params)})"


def _bound(name: str, binding) -> type:
    """A class with the constructor and forward that lesson 12's binding gives Python."""
    methods = {}
    for method, arguments in (("__init__", binding.init), ("forward", binding.forward)):

        def bound(*args, **kwargs):
            return None

        bound.__signature__ = python_signature(arguments)
        methods[method] = bound
    return type(name, (), methods)


TABLES = _tables()


def test_every_lesson_and_exercise_is_in_the_contract():
    written = {lesson: [SIGNATURE.match(row[0])["name"] for row in rows] for lesson, rows in TABLES.items()}
    assert {lesson: written.get(lesson) for lesson in lessons.EXERCISES} == lessons.EXERCISES


@pytest.mark.parametrize(
    ("lesson", "row"), [(lesson, row) for lesson, rows in TABLES.items() for row in rows], ids=str
)
def test_signatures_are_the_reference_ones(lesson, row):
    definition, methods = row[0], row[1]
    name = SIGNATURE.match(definition)["name"]
    reference = getattr(solutions, name, None) or getattr(cpp_reference, name)
    if isinstance(reference, CppSource):  # lesson 12: the signatures are those of the course's binding
        reference = _bound(name, BINDINGS[reference.name])
    is_class = isinstance(reference, type)
    assert definition.strip("`") == _written(reference.__init__ if is_class else reference, name, is_class)
    for method in SIGNATURE.finditer(methods):
        assert is_class, f"{name} is a function, yet the contract lists methods for it"
        assert method[0].strip("`") == _written(getattr(reference, method["name"]), method["name"], True)


def test_the_readme_links_the_contract_and_nothing_points_outside_the_repository():
    assert "(docs/contract.md)" in (lessons.ROOT / "README.md").read_text()
    outside = "shared/" + "design"  # the design folder beside the repository, which a clone lacks
    tracked = subprocess.run(
        ["git", "ls-files"], cwd=lessons.ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    pointing = [name for name in tracked if outside in (lessons.ROOT / name).read_text(errors="replace")]
    assert not pointing, f"these files point outside the repository: {pointing}"
