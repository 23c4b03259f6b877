"""Hostile lesson-12 submissions: the C++ build cache as a channel between students, and lesson 12
answered without C++ (issue 31).

Each attack is shown succeeding without its defence (the defence monkeypatched off, or the cache
laid out as it was before) and then failing with it:

- a kernel lists the grader's shared C++ cache and reads what other students left there: another
  student's whole source (in each build's ``finished`` mark), a failed build's compiler message,
  the build log naming each student's folder, the lock files naming each unit;
- stubs left in place and ``CppEmbedding = Embedding`` (the Python class) in a cell added below:
  full marks before the checks and before the judge, and no flag;
- a precompiled header planted in the grader's machine cache (``cpp_pch.machine_cache``) where
  another user may write it (a shared folder named by ``COURSE_GRADER_CPP_CACHE``), or in a folder
  of it that another may write: every later workspace would link it, and every build read it.

The cache attack costs two real builds (the reference's Embedding, which builds, and a broken one,
which fails), made once by the trusted step as shipped; the layout as it was is then filled from
those very outcomes, so no build is made twice.
"""

import json
import socket
import threading
from pathlib import Path

import nbformat
import pytest

from autograder import grading, libtorch
from autograder.capstone import learner_code
from autograder.checks import CheckFailure
from autograder.checks import libtorch as checks
from autograder.engine import cpp_cache, flags
from autograder.engine.judge import run_test_cell
from autograder.engine.kernels import sandbox
from autograder.engine.kernels.sandbox import Limits
from autograder.engine.remote import Channel, Endpoint, models_read_only
from autograder.lessons import EXERCISES
from solutions.embedding import Embedding
from solutions.libtorch import CppEmbedding
from tests.helpers import (
    BROKEN_CPP,
    CPP_CELL_LIMIT_S,
    CPP_LESSON,
    cpp_submission,
    fake_trusted_builds,
    in_kernel_sandbox,
)

pytestmark = pytest.mark.skipif(sandbox.problem() is not None, reason=str(sandbox.problem()))

# what a later student's kernel tries: list the shared cache and read everything in it, then the
# grader's own files beside it, by the names this repository gives them
SPY = """
import json, os
cache = os.environ["COURSE_CPP_CACHE"].split(":")[1]
records = os.path.join(os.path.dirname(cache), {records!r})
seen = {{}}
for root in (cache, records):
    try:
        os.listdir(root)
    except OSError as error:
        seen[root] = "refused: " + error.strerror
    for folder, _, files in os.walk(root):
        for name in files:
            path = os.path.join(folder, name)
            try:
                seen[path] = open(path, "rb").read().decode(errors="replace")
            except OSError as error:
                seen[path] = "refused: " + error.strerror
for name in ({log!r}, "builds.log"):
    for root in (cache, records):
        path = os.path.join(root, name)
        try:
            seen[path] = open(path).read()
        except OSError as error:
            seen[path] = "refused: " + error.strerror
print(json.dumps(seen))
"""


def _spied(workspace: Path) -> dict[str, str]:
    """What a sandboxed kernel read of the C++ cache and the grader's files beside it."""
    code = SPY.format(records=cpp_cache.RECORDS_FOLDER, log=cpp_cache.BUILD_LOG)
    done = in_kernel_sandbox(workspace, code)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def _graded(workspace: Path) -> None:
    """The trusted step for ada (the reference's Embedding, which builds) and ben (a broken one)."""
    cache = cpp_cache.shared_cache(workspace)
    for student, source in (("ada", CppEmbedding.source), ("ben", BROKEN_CPP)):
        cell = f'CppEmbedding = compile_module("Embedding", r"""{source}""")'
        folder = cpp_submission(workspace / "submitted" / student / CPP_LESSON, cell)
        cpp_cache.prebuild(folder, CPP_LESSON, cache, Limits(), CPP_CELL_LIMIT_S, hidden=(workspace,))


@pytest.fixture(scope="module")
def caches(tmp_path_factory):
    """(defended, as it was): two workspaces where ada's and ben's C++ went through the trusted
    step, the first as shipped, the second with the cache laid out as it was before issue 31 (the
    grader's records in the cache, the cache listable, the source in ``finished``)."""
    if libtorch.missing_tools():
        pytest.skip(libtorch.explain_missing(libtorch.missing_tools()))
    defended, undefended = tmp_path_factory.mktemp("defended"), tmp_path_factory.mktemp("undefended")
    _graded(defended)
    shared = cpp_cache.shared_cache(defended)
    logged = [line.split()[1:3] for line in cpp_cache.builds_logged(shared)]  # name, built or failed
    assert sorted(outcome for _, outcome in logged) == ["built", "failed"], logged  # ada's, ben's
    failed = {
        name: (cpp_cache.records(shared) / f"{name}.failed").read_text()
        for name, how in logged
        if how == "failed"
    }

    def as_before(name, unit, cache, binding, limits, hidden, limit_s):
        """The build as the defended step had it, installed as install did before: with the unit."""
        if name in failed:
            return cpp_cache.Failure(failed[name], final=True)
        cpp_cache.install(shared / name / f"{name}.so", name, cache)
        (cache / name / libtorch.FINISHED).write_text(unit)
        return None

    def listable(folder: Path) -> None:
        folder.chmod(0o755)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(cpp_cache, "build_trusted", as_before)
        patch.setattr(cpp_cache, "trusted_pch", lambda cache: None)  # before issue 34: no precompiled header
        patch.setattr(cpp_cache, "trusted_binding", lambda cache: cache / "unused.o")  # nor binding object
        patch.setattr(cpp_cache, "records", lambda cache: cache)
        patch.setattr(cpp_cache, "open_only_by_name", listable)
        patch.setattr(sandbox, "open_only_by_name", listable)
        _graded(undefended)
        seen_before = _spied(undefended)
    return _spied(defended), seen_before


def test_a_kernel_read_another_students_source_and_names_from_the_cache_as_it_was(caches):
    _, before = caches
    read = "\n".join(before.values())
    assert CppEmbedding.source in read  # ada's whole C++, to hand in as one's own: full marks
    assert "undeclared_scale" in read  # ben's failed build: his compiler's message
    assert "submitted/ada/12_libtorch" in read and "submitted/ben/12_libtorch" in read  # builds.log
    assert any(path.endswith(".lock") for path in before) and any(path.endswith(".failed") for path in before)


def test_a_kernel_reads_nothing_of_anyone_in_the_cache(caches):
    defended, _ = caches
    assert all(value.startswith("refused: ") for value in defended.values()), defended
    cache = next(path for path in defended if path.endswith(cpp_cache.SHARED_FOLDER))
    assert defended[cache] == "refused: Permission denied"  # listed: never; by name only
    records = next(path for path in defended if path.endswith(cpp_cache.RECORDS_FOLDER))
    assert defended[records] == "refused: No such file or directory"  # the grader's, hidden
    assert not any(path.endswith((".lock", ".failed", ".so", libtorch.FINISHED)) for path in defended)


# ------------------------------------------------------------------------------ no C++ at all

EXERCISE = "CppEmbedding"
CELLS = [test for test in grading.table(CPP_LESSON) if test.exercise == EXERCISE]
PARTS = sum(bool(part) for test in CELLS for part in (test.visible, test.hidden))


def _alias_notebook() -> nbformat.NotebookNode:
    """Lesson 12 as handed out (nbgrader's stubs), then a cell added below that writes lesson 01's
    Embedding in Python (as the reference does) and aliases it."""
    stub = 'compile_module("{}", r"""\n# YOUR CODE HERE\nraise NotImplementedError()\n""")'
    cells = [
        nbformat.v4.new_code_cell(
            f"{name} = {stub.format(name.removeprefix('Cpp'))}",
            metadata={"nbgrader": {"grade_id": name, "solution": True}},
        )
        for name in EXERCISES[CPP_LESSON]
    ]
    added = nbformat.v4.new_code_cell(f"{learner_code('Embedding')}\n\nCppEmbedding = Embedding")
    return nbformat.v4.new_notebook(cells=[*cells, added])


def _in_notebook(cls) -> list[str | None]:
    """Each part (visible, hidden) of CppEmbedding's test cells run next to ``cls``: None where it passed."""
    verdicts = []
    for test in CELLS:
        for code in filter(None, (test.visible, test.hidden)):
            try:
                grading.run(test, code, cls)
                verdicts.append(None)
            except CheckFailure as failure:
                verdicts.append(str(failure))
    return verdicts


def _before_the_judge(cls) -> list[str | None]:
    """Each of CppEmbedding's test cells as the judge runs it, ``cls`` served as a kernel serves it."""
    verdicts = []
    for test in CELLS:
        ours, theirs = socket.socketpair()
        threading.Thread(target=Endpoint(Channel(theirs), {EXERCISE: cls}).serve, daemon=True).start()
        endpoint = Endpoint(Channel(ours), guard=models_read_only)
        source = f"{test.visible}\n{test.hidden}"
        verdicts.append(
            run_test_cell(source, test.grade_id, grading.grading_imports(CPP_LESSON), endpoint, seed=7)
        )
        endpoint.say_goodbye()
    return verdicts


def test_a_python_class_aliased_in_an_added_cell_took_full_marks_without_the_defence(monkeypatch):
    monkeypatch.setattr(checks, "expect_compiled", lambda exercise, cls: None)
    monkeypatch.setattr(flags, "cpp_names_bound", lambda source: set())  # the flags read only exercise cells
    assert _in_notebook(Embedding) == [None] * PARTS
    assert _before_the_judge(Embedding) == [None] * len(CELLS)
    assert flags.flags(_alias_notebook()) == []


def test_a_python_class_aliased_in_an_added_cell_scores_nothing_and_is_flagged():
    said = "CppEmbedding: lesson 12 is answered in C++"
    assert all(verdict is not None and verdict.startswith(said) for verdict in _in_notebook(Embedding))
    assert all(verdict is not None and said in verdict for verdict in _before_the_judge(Embedding))
    found = [(flag.cell, flag.reason) for flag in flags.flags(_alias_notebook())]
    assert found == [
        (
            "cell 4 (added by the learner)",
            "binds CppEmbedding outside its exercise cell, where lesson 12 asks for C++",
        )
    ]


def test_a_compiled_class_with_a_python_forward_is_refused_too():
    """The record is of the class as compile_module made it: a subclass, or the same class with its
    forward swapped for Python, is not what compile_module built (the 21-variant build of the suite)."""
    from tests.alternatives import libtorch as cpp_variants

    if libtorch.missing_tools():
        pytest.skip(libtorch.explain_missing(libtorch.missing_tools()))
    compiled = cpp_variants.compiled()[EXERCISE, "reference"]
    assert _in_notebook(compiled) == [None] * PARTS
    assert _before_the_judge(compiled) == [None] * len(CELLS)
    subclass = type(
        "Embedding", (compiled,), {"forward": lambda self, tokens: Embedding.forward(self, tokens)}
    )
    assert all(
        verdict and "which compile_module did not build" in verdict for verdict in _in_notebook(subclass)
    )
    original = compiled.forward
    try:
        compiled.forward = lambda self, tokens: original(self, tokens)
        assert all(verdict and "answered in C++" in verdict for verdict in _before_the_judge(compiled))
    finally:
        del compiled.forward
    assert _before_the_judge(compiled) == [None] * len(CELLS)


@pytest.mark.parametrize("writable", ["the machine cache", "the header's folder"])
def test_a_header_planted_where_another_user_may_write_never_reaches_a_workspace(
    tmp_path, monkeypatch, writable
):
    from autograder import cpp_pch

    machine = tmp_path / "shared"
    monkeypatch.setenv(cpp_cache.MACHINE_VARIABLE, str(machine))
    planted = machine / cpp_pch.folder_name(libtorch.UNIT_HEAD)
    planted.mkdir(parents=True)
    (planted / cpp_pch.HEADER).write_text("\n".join(libtorch.UNIT_HEAD) + "\n")
    (planted / f"{cpp_pch.HEADER}.gch").write_bytes(b"planted")
    (planted / libtorch.FINISHED).write_text("")
    (machine if writable == "the machine cache" else planted).chmod(0o777)  # as another user could
    fake_trusted_builds(monkeypatch)

    def header_of(workspace: Path) -> bytes:
        header, _ = cpp_cache.prepare(cpp_cache.shared_cache(workspace))
        return header.with_name(f"{cpp_pch.HEADER}.gch").read_bytes()

    with monkeypatch.context() as patch:
        patch.setattr(cpp_pch, "private", lambda path: True)  # without the defence
        assert header_of(tmp_path / "before") == b"planted"  # every build of the workspace would read it
    assert header_of(tmp_path / "after") == b"made"
