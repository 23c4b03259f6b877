"""A generated class for the similarity report: independent learners, planted copies, a workspace.

An independent learner writes each exercise of a lesson one of the ways known to be right (the
reference's body, or an alternative of tests/alternatives/), in a style of their own: each of
STYLE_CHOICES is taken or not, as a coin falls, and local names, comments and some `return`
lines differ. A planted copy takes another learner's cells and disguises them as a copier would:
new local names, independent statements swapped, comments changed, added or removed.
"""

import ast
import inspect
import io
import random
import re
import shutil
import sys
import tempfile
import tokenize
from pathlib import Path

import nbformat

from autograder import lessons
from autograder.instructor.similarity import similarity
from autograder.instructor.similarity_threshold import GRID
from tests.alternatives import ALTERNATIVES

LESSONS = ["05_multi_head", "10_training"]
STUB_LINE = re.compile(r"^\s*(# YOUR CODE HERE|raise NotImplementedError\(\))\s*$")
MARKER_LINE = re.compile(r"^\s*### (BEGIN|END) SOLUTION\s*$")

# Ways of writing the same thing that learners differ in, each taken or not by a coin.
STYLE_CHOICES = [
    (r"dim=-1\)", "-1)"),
    (r"\.transpose\(-2, -1\)", ".mT"),
    (r'float\("-inf"\)', "-math.inf"),
    (r"math\.sqrt\((\w+)\)", r"\1 ** 0.5"),
    (r"\.size\((-?\d+)\)", r".shape[\1]"),
    (r"\.contiguous\(\)\.view\(", ".reshape("),
    (r"\.view\(", ".reshape("),
    (r"(\w+)\.item\(\)", r"float(\1)"),
    (r"torch\.softmax\(", "F.softmax("),
    (r"\bnn\.Linear\(", "torch.nn.Linear("),
    (r"optimizer\.zero_grad\(\)", "optimizer.zero_grad(set_to_none=True)"),
    (r"\bF\.", "torch.nn.functional."),
    (r"torch\.tensor\(", "torch.as_tensor("),
    (r"\[:, None, None, :\]", ".unsqueeze(1).unsqueeze(2)"),
    (r"\.unsqueeze\(-1\)", "[..., None]"),
    (r"\.squeeze\(-1\)", "[..., 0]"),
    (r"\bis not None\b", "is not None and True"),
    (r"\bself\.n_heads\b", "self.h"),
    (r"\.masked_fill\(", ".masked_fill_("),
    (r"torch\.matmul\((\w+), (\w+)\)", r"\1 @ \2"),
    (r"super\(\)\.__init__\(\)", "nn.Module.__init__(self)"),
    (r"nn\.Linear\((\w+), (\w+)\)", r"nn.Linear(\1, \2, bias=True)"),
    (r'batch\["(\w+)"\]', r'batch.get("\1")'),
    (r" != 0:", ":"),
    (r"\.shape\b(?!\[)", ".size()"),
    (r"(\w+)\.backward\(\)", r"torch.autograd.backward(\1)"),
    (r"\.tolist\(\)", ".cpu().tolist()"),
    (r"\bdim=", "axis="),
    (r"\.long\(\)", ".to(torch.long)"),
    (r"\bmath\.inf\b", "float('inf')"),
    (r"self\.(\w+)\(", r"self.\1.__call__("),
    (r"\blen\((\w+)\)", r"\1.__len__()"),
]
NEW_NAMES = ["tmp", "val", "res", "out_", "acc", "buf", "aux", "cur", "nxt", "part", "piece", "item_"]
COMMENTS = [
    "# shapes as in the contract",
    "# TODO tidy",
    "# this took a while",
    "# see the lesson",
    "# works",
]


def implementations(lesson: str, exercise: str) -> list[str]:
    """The cell sources known to be right for an exercise: the reference, then the alternatives."""
    source = nbformat.read(lessons.source_path(lesson), as_version=4)
    cell = next(c for c in source.cells if c.metadata.get("nbgrader", {}).get("grade_id") == exercise)
    reference = "\n".join(line for line in cell.source.splitlines() if not MARKER_LINE.match(line))
    ways = [reference]
    for alternative in ALTERNATIVES.get(exercise, []):
        code = inspect.getsource(alternative)
        ways.append(re.sub(rf"^(def|class) {alternative.__name__}\b", rf"\1 {exercise}", code, flags=re.M))
    return ways


def _tokens(code: str) -> list[tokenize.TokenInfo]:
    return list(tokenize.generate_tokens(io.StringIO(code).readline))


def _replace_tokens(code: str, edits: list[tuple[tokenize.TokenInfo, str]]) -> str:
    """``code`` with each token replaced by its text (edits within a line applied right to left)."""
    lines = code.splitlines(keepends=True)
    for token, text in sorted(edits, key=lambda edit: edit[0].start, reverse=True):
        (row, start), (_, end) = token.start, token.end
        lines[row - 1] = lines[row - 1][:start] + text + lines[row - 1][end:]
    return "".join(lines)


def rename_locals(code: str, rng: random.Random) -> str:
    """Every local variable (not a parameter, not an attribute) under a new name."""
    tree = ast.parse(code)
    stored = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    fresh = {name: f"{rng.choice(NEW_NAMES)}_{index}" for index, name in enumerate(sorted(stored))}
    tokens = _tokens(code)
    edits = [
        (token, fresh[token.string])
        for previous, token in zip([None, *tokens], tokens, strict=False)
        if token.type == tokenize.NAME
        and token.string in fresh
        and not (previous is not None and previous.string == ".")
    ]
    return _replace_tokens(code, edits)


def change_comments(code: str, rng: random.Random) -> str:
    """Comments removed or reworded, and a few added at the end of lines."""
    edits = [
        (token, rng.choice(["", rng.choice(COMMENTS)]))
        for token in _tokens(code)
        if token.type == tokenize.COMMENT and not token.string.startswith("###")
    ]
    lines = _replace_tokens(code, edits).splitlines()
    return "\n".join(line + ("  " + rng.choice(COMMENTS) if rng.random() < 0.2 else "") for line in lines)


def _names(node: ast.AST, context: type) -> set[str]:
    """The names (and self.attributes) that ``node`` reads (ast.Load) or writes (ast.Store)."""
    found = set()
    for sub in ast.walk(node):
        if isinstance(sub, ast.Name | ast.Attribute) and isinstance(sub.ctx, context):
            found.add(ast.unparse(sub))
    return found


def reorder_statements(code: str, rng: random.Random) -> str:
    """Some adjacent one-line assignments that neither reads nor writes what the other writes, swapped."""
    lines = code.splitlines()
    for node in ast.walk(ast.parse(code)):
        body = getattr(node, "body", None)
        if not isinstance(body, list):
            continue
        index = 0
        while index + 1 < len(body):
            first, second = body[index], body[index + 1]
            one_line = (
                all(isinstance(s, ast.Assign) and s.lineno == s.end_lineno for s in (first, second))
                and first.lineno + 1 == second.lineno
            )
            if one_line:
                writes_1, writes_2 = _names(first, ast.Store), _names(second, ast.Store)
                reads_1, reads_2 = _names(first, ast.Load), _names(second, ast.Load)
                if not writes_1 & (reads_2 | writes_2) and not writes_2 & reads_1 and rng.random() < 0.5:
                    row = first.lineno - 1
                    lines[row], lines[row + 1] = lines[row + 1], lines[row]
                    index += 2
                    continue
            index += 1
    return "\n".join(lines)


def in_own_style(code: str, choices: list[tuple[str, str]], rng: random.Random) -> str:
    """An independent learner's version: their style choices, names, comments and returns."""
    for pattern, replacement in choices:  # where the learner is of two minds, a coin decides
        code = re.sub(
            pattern, lambda m, r=replacement: m.expand(r) if rng.random() < 0.7 else m.group(0), code
        )
    if rng.random() < 0.5:  # the value returned given a name first
        code = RETURN_LINE.sub(_named_return, code)
    code = split_tuples(hoist_arguments(code, rng), rng)
    return change_comments(rename_locals(code, rng), rng)


def split_tuples(code: str, rng: random.Random) -> str:
    """Some one-line tuple assignments (`a, b = x, y`) written as one assignment per line."""
    lines = code.splitlines()
    for node in sorted(ast.walk(ast.parse(code)), key=lambda node: -getattr(node, "lineno", 0)):
        if not (
            isinstance(node, ast.Assign)
            and node.lineno == node.end_lineno
            and isinstance(node.targets[0], ast.Tuple)
            and isinstance(node.value, ast.Tuple)
            and len(node.targets[0].elts) == len(node.value.elts)
            and rng.random() < 0.5
        ):
            continue
        indent = re.match(r"\s*", lines[node.lineno - 1]).group(0)
        pairs = zip(node.targets[0].elts, node.value.elts, strict=True)
        lines[node.lineno - 1] = "\n".join(f"{indent}{ast.unparse(t)} = {ast.unparse(v)}" for t, v in pairs)
    return "\n".join(lines)


def hoist_arguments(code: str, rng: random.Random) -> str:
    """Step by step instead of nested: in some one-line statements, an argument that is itself a
    computation becomes a variable of its own on the line before (as many learners write)."""
    lines = code.splitlines()
    statements = [
        node
        for node in ast.walk(ast.parse(code))
        if isinstance(node, ast.Assign | ast.Return | ast.Expr)
        and node.lineno == node.end_lineno
        and not any(isinstance(sub, ast.Lambda | ast.comprehension) for sub in ast.walk(node))
    ]
    for number, statement in enumerate(sorted(statements, key=lambda node: -node.lineno)):
        argument = next(
            (
                arg
                for call in ast.walk(statement)
                if isinstance(call, ast.Call)
                for arg in call.args
                if isinstance(arg, ast.Call | ast.BinOp)
            ),
            None,
        )
        if argument is None or rng.random() < 0.5:
            continue
        row, indent = statement.lineno - 1, re.match(r"\s*", lines[statement.lineno - 1]).group(0)
        hoisted = f"step{number}"
        text = ast.unparse(argument)
        rest = ast.unparse(statement).replace(text, hoisted, 1)
        lines[row] = f"{indent}{hoisted} = {text}\n{indent}{rest}"
    return "\n".join(lines)


RETURN_LINE = re.compile(r"^(\s+)return (.+)$", flags=re.M)


def _named_return(match: re.Match) -> str:
    """'return x @ v' -> 'result = x @ v' and 'return result', when the line is a whole statement."""
    indent, value = match.groups()
    try:
        ast.parse(value)
    except SyntaxError:
        return match.group(0)
    return f"{indent}result = {value}\n{indent}return result"


def disguised(code: str, rng: random.Random) -> str:
    """A copier's version of ``code``: new names, independent statements swapped, comments changed."""
    return change_comments(reorder_statements(rename_locals(code, rng), rng), rng)


def independent_class(count: int, seed: int) -> dict[str, dict[str, dict[str, str]]]:
    """student -> lesson -> exercise -> cell source, for ``count`` learners who worked alone."""
    rng = random.Random(seed)
    ways = {lesson: {e: implementations(lesson, e) for e in lessons.EXERCISES[lesson]} for lesson in LESSONS}
    students = {}
    for number in range(count):
        choices = [choice for choice in STYLE_CHOICES if rng.random() < 0.8]
        students[f"learner{number:03d}"] = {
            lesson: {
                exercise: in_own_style(rng.choice(options), choices, rng) for exercise, options in by.items()
            }
            for lesson, by in ways.items()
        }
    return students


def write_workspace(workspace: Path, students: dict[str, dict[str, dict[str, str]]]) -> None:
    """release/<lesson>/<notebook> (the course's learners' notebook) and each learner's
    submitted/<student>/<lesson>/<notebook>, with their cells in place of the stubs."""
    for lesson in LESSONS:
        release = workspace / "release" / lesson / lessons.notebook_name(lesson)
        release.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(lessons.course_path(lesson), release)
    for student, by_lesson in students.items():
        for lesson, cells in by_lesson.items():
            write_submission(workspace, student, lesson, cells)


def write_submission(workspace: Path, student: str, lesson: str, cells: dict[str, str]) -> Path:
    """One learner's notebook for ``lesson``: the released one, with ``cells`` (grade_id -> source)."""
    notebook = nbformat.read(lessons.course_path(lesson), as_version=4)
    for cell in notebook.cells:
        grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
        if cell.metadata.get("nbgrader", {}).get("solution") and grade_id in cells:
            cell.source = cells[grade_id]
    path = workspace / "submitted" / student / lesson / lessons.notebook_name(lesson)
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(notebook, path)
    return path


def planted_class(
    count: int, copiers: int, seed: int
) -> tuple[dict[str, dict[str, dict[str, str]]], dict[str, str]]:
    """``count`` independent learners (independent_class) and ``copiers`` more, each with a
    disguised copy of one of them: the students, and each copier's source."""
    students = independent_class(count, seed=seed)
    rng = random.Random(seed + 1000)
    copies = {}
    for source in rng.sample(sorted(students), copiers):
        copier = source.replace("learner", "copier")
        students[copier] = {
            lesson: {exercise: disguised(code, rng) for exercise, code in cells.items()}
            for lesson, cells in students[source].items()
        }
        copies[copier] = source
    return students, copies


def measure(workspace: Path, count: int, copiers: int, seed: int) -> dict[str, dict[str, list[float]]]:
    """The scores of a planted class written into ``workspace``: lesson -> 'independent' (pairs
    with no copier in them) and 'copies' (each copier with their source), lowest first. A pair of
    a copier with anyone else is neither, and is left out."""
    students, copies = planted_class(count, copiers, seed)
    write_workspace(workspace, students)
    scores: dict[str, dict[str, list[float]]] = {
        lesson: {"independent": [], "copies": []} for lesson in LESSONS
    }
    for pair in similarity(workspace).pairs:
        if copies.get(pair.student_a) == pair.student_b or copies.get(pair.student_b) == pair.student_a:
            scores[pair.lesson]["copies"].append(pair.similarity)
        elif not {pair.student_a, pair.student_b} & copies.keys():
            scores[pair.lesson]["independent"].append(pair.similarity)
    return {lesson: {kind: sorted(values) for kind, values in by.items()} for lesson, by in scores.items()}


def main() -> None:
    """python -m tests.similarity_class COUNT COPIERS SEED...: how many independent pairs and
    copies reach each share of similarity_threshold.GRID, per lesson, over the seeds' classes
    (the figures similarity_threshold.MEASURED holds)."""
    count, copiers, *seeds = (int(argument) for argument in sys.argv[1:])
    totals: dict[str, dict[str, list[float]]] = {
        lesson: {"independent": [], "copies": []} for lesson in LESSONS
    }
    for seed in seeds:
        with tempfile.TemporaryDirectory() as folder:
            for lesson, by in measure(Path(folder), count, copiers, seed).items():
                for kind, values in by.items():
                    totals[lesson][kind] += values
                print(
                    seed,
                    lesson,
                    "highest independent",
                    by["independent"][-3:],
                    "lowest copies",
                    by["copies"][:3],
                )
    for lesson, by in totals.items():
        for kind, values in by.items():
            at = {share: sum(value >= share for value in values) for share in GRID}
            print(f"{lesson} {kind}: {len(values)} pairs; at or above: {at}")


if __name__ == "__main__":
    main()
