"""Lesson 12's shared cache of C++ builds (autograder/engine/cpp_cache.py): the grader fills it, kernels
only read it, and no submission can make another import a library of its making.

Builds are counted in the cache (its build log and folders), never timed. Four real compiles run
here: the precompiled header and the binding object, which the trusted step makes once each (about
65 s of CPU for the two; 0.7 GB and 3.5 MB), the reference's Embedding, built by the trusted step once
for two submissions, and a variant that a kernel builds privately (a few seconds of CPU each with
the header). Kernels are stood for by Python
processes in the grading kernels' sandbox: the same mounts (the workspace hidden, the shared cache
bound read-only, a private /tmp) and the same environment (``kernel_environment``).
"""

import json
import re
import threading
import time
from pathlib import Path

import pytest

from autograder import cpp_binding, cpp_pch, libtorch
from autograder.engine import cpp_cache
from autograder.engine.kernels import sandbox
from autograder.engine.kernels.environment import CPP_CACHE_IN_SANDBOX
from autograder.engine.kernels.sandbox import Limits
from solutions.libtorch import CppEmbedding, CppPositionwiseFeedForward
from tests.helpers import CPP_CELL_LIMIT_S, CPP_LESSON, cpp_submission, fake_trusted_builds, in_kernel_sandbox

pytestmark = pytest.mark.skipif(sandbox.problem() is not None, reason=str(sandbox.problem()))

REFERENCE_CELL = CppEmbedding.cell("CppEmbedding")
NOT_LITERAL = [
    f"source = r'''{CppEmbedding.source}'''\nCppEmbedding = compile_module('Embedding', source)",
    f'CppEmbedding = compile_module("Embedding", r"""{CppEmbedding.source}""" + "")',
    f'CppEmbedding = compile_module(name="Embedding", source=r"""{CppEmbedding.source}""")',
    f'Other = compile_module("Embedding", r"""{CppEmbedding.source}""")',  # not an exercise's name
    f'CppEmbedding = compile_module("Unknown", r"""{CppEmbedding.source}""")',
    f'CppEmbedding = compile_module("MultiHeadAttention", r"""{CppEmbedding.source}""")',  # not its own
]


def kernel_compiles(workspace: Path, source: str) -> dict:
    """What a sandboxed kernel's ``compile_module("Embedding", source)`` did: how it had the build
    (``build_note``), from which library, and whether the module computes."""
    code = f"""
import json, torch
from autograder import libtorch
cls = libtorch.compile_module("Embedding", {source!r})
unit = libtorch.translation_unit([libtorch.cell_part("Embedding", {source!r})])
out = cls(11, 4)(torch.tensor([[1, 2]]))
library = libtorch.finished_library(libtorch.build_name(unit))
pch = libtorch.cpp_pch.finished(libtorch.cache_roots(), libtorch.UNIT_HEAD, libtorch.FINISHED)
binding = libtorch.cpp_binding.finished(libtorch.cache_roots(), libtorch.FINISHED)
seen = {{"note": cls.build_note, "library": str(library), "shape": list(out.shape), "pch": str(pch)}}
seen["binding"] = str(binding)
print(json.dumps(seen))
"""
    done = in_kernel_sandbox(workspace, code)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """A workspace where the trusted step ran for two submissions of the same C++ (ada, then bob)."""
    if libtorch.missing_tools():
        pytest.skip(libtorch.explain_missing(libtorch.missing_tools()))
    workspace = tmp_path_factory.mktemp("workspace")
    cache = cpp_cache.shared_cache(workspace)
    runs = {}
    for student in ("ada", "bob"):
        folder = cpp_submission(
            workspace / "submitted" / student / "12_libtorch", "import torch", REFERENCE_CELL
        )
        runs[student] = cpp_cache.prebuild(
            folder, CPP_LESSON, cache, Limits(), CPP_CELL_LIMIT_S, hidden=(workspace,)
        )
    return workspace, runs


def reference_build() -> str:
    return libtorch.build_name(
        libtorch.translation_unit([libtorch.cell_part("Embedding", CppEmbedding.source)])
    )


def test_a_kernel_can_write_a_writable_shared_folder_and_cannot_write_the_read_only_one(tmp_path):
    workspace = tmp_path / "workspace"
    cache = cpp_cache.shared_cache(workspace)
    plant = f"open({str(cache / 'planted')!r}, 'w').write('x'); print('planted')"
    attack = in_kernel_sandbox(workspace, plant, defended=False)
    assert attack.returncode == 0 and (cache / "planted").is_file(), attack.stderr  # without the defence
    (cache / "planted").unlink()
    defended = in_kernel_sandbox(workspace, plant)
    assert defended.returncode != 0 and "Read-only file system" in defended.stderr, defended.stderr
    assert not (cache / "planted").exists()
    # the kernel sees the cache (second in its list), but nothing else of the workspace
    (workspace / "gradebook.db").write_text("secret")
    look = f"import os; print(os.environ['COURSE_CPP_CACHE'], os.listdir({str(workspace)!r}))"
    seen = in_kernel_sandbox(workspace, look)
    assert seen.stdout.split()[0] == f"/tmp/course-cpp:{cache}"
    assert "gradebook.db" not in seen.stdout


def test_the_grading_configuration_binds_the_workspace_cache_into_every_kernel(tmp_path):
    from autograder.engine.nbgrader_config import course_config

    config = course_config(tmp_path)
    assert config.SandboxSettings.cpp_cache == str(cpp_cache.shared_cache(tmp_path))


def test_two_submissions_of_the_same_cpp_cost_one_build_and_the_second_kernel_imports_it(graded):
    workspace, runs = graded
    cache = cpp_cache.shared_cache(workspace)
    name = reference_build()
    assert runs["ada"].built == [name] and runs["bob"].found == [name] and not runs["bob"].built
    assert len(cpp_cache.builds_logged(cache)) == 1
    assert (cache / name / libtorch.FINISHED).read_text() == ""  # no source where kernels read
    # the precompiled header: made once, by the grader, from the course's fixed lines only
    [pch_line] = (cpp_cache.records(cache) / cpp_cache.PCH_LOG).read_text().splitlines()
    header = cpp_pch.finished([cache], libtorch.UNIT_HEAD, libtorch.FINISHED)
    assert header is not None and re.search(f"{header.parent.name} (built|linked from .+) in ", pch_line)
    assert header.read_text() == cpp_pch.text(libtorch.UNIT_HEAD, cpp_pch.listed_instances())
    [binding_line] = (cpp_cache.records(cache) / cpp_cache.BINDING_LOG).read_text().splitlines()
    assert re.search(f"{cpp_binding.folder_name()} (built|linked from .+) in ", binding_line)  # by the grader
    seen = kernel_compiles(workspace, CppEmbedding.source)
    assert seen["note"].startswith("loaded from the cache"), seen
    assert seen["library"] == str(cache / name / f"{name}.so") and seen["shape"] == [1, 2, 4]


@pytest.mark.parametrize("cell", NOT_LITERAL)
def test_a_cell_that_is_not_a_literal_compile_module_call_is_not_prebuilt(tmp_path, cell):
    folder = cpp_submission(tmp_path / "submitted" / "cy" / "12_libtorch", cell)
    assert cpp_cache.submission_units(folder) == {}
    assert (
        cpp_cache.prebuild(folder, CPP_LESSON, tmp_path / "cache", Limits(), CPP_CELL_LIMIT_S)
        == cpp_cache.Prebuilt()
    )
    assert not (tmp_path / "cache").exists()


def test_the_lesson_12_cell_with_verbose_is_prebuilt_like_the_plain_one(tmp_path):
    plain = cpp_submission(tmp_path / "plain", REFERENCE_CELL)
    verbose = cpp_submission(tmp_path / "verbose", REFERENCE_CELL.removesuffix(")") + ", verbose=True)")
    assert cpp_cache.submission_units(verbose) == cpp_cache.submission_units(plain) != {}


def test_a_lesson_without_cpp_exercises_builds_nothing(tmp_path):
    folder = cpp_submission(tmp_path / "submitted" / "cy" / "01_embedding", REFERENCE_CELL)
    assert cpp_cache.submission_units(folder) != {}  # a lesson-12 cell, added to lesson 01
    assert (
        cpp_cache.prebuild(folder, "01_embedding", tmp_path / "cache", Limits(), CPP_CELL_LIMIT_S).built == []
    )
    assert not (tmp_path / "cache").exists() and not (tmp_path / cpp_cache.RECORDS_FOLDER).exists()


def test_a_cell_not_prebuilt_still_builds_privately_in_its_kernel(graded):
    workspace, _ = graded
    variant = CppEmbedding.source + "\n// a comment of cy's own\n"
    seen = kernel_compiles(workspace, variant)
    assert seen["note"].startswith("compiled in"), seen
    assert seen["library"].startswith("/tmp/course-cpp/") and seen["shape"] == [1, 2, 4]
    cache = cpp_cache.shared_cache(workspace)
    assert len(cpp_cache.builds_logged(cache)) == 1  # not in the shared cache
    # it read the grader's precompiled header and linked the grader's binding object (the kernel
    # finds them by name in the shared cache), and made neither of its own
    assert seen["pch"] == str(cpp_pch.finished([cache], libtorch.UNIT_HEAD, libtorch.FINISHED))
    assert seen["binding"] == str(cpp_binding.finished([cache], libtorch.FINISHED))


POISON = """
import os, sys
from autograder import libtorch
name = {name!r}
for root in libtorch.cache_roots():
    try:
        os.makedirs(os.path.join(root, name), exist_ok=True)
        open(os.path.join(root, name, name + ".so"), "wb").write(b"poison")
        open(os.path.join(root, name, libtorch.FINISHED), "w").write("poison")
        print("planted", root)
    except OSError as error:
        print("refused", root, error.strerror)
print("found", libtorch.finished_library(name))
"""


def test_a_poisoned_build_planted_by_one_kernel_is_never_imported_by_another(graded, tmp_path):
    workspace, _ = graded
    cache = cpp_cache.shared_cache(workspace)
    name = reference_build()
    # the attack: a kernel writes a "finished" build under the reference's name where it can
    planted = in_kernel_sandbox(workspace, POISON.format(name=name))
    assert planted.returncode == 0, planted.stderr
    lines = planted.stdout.splitlines()
    assert f"planted {CPP_CACHE_IN_SANDBOX}" in lines
    assert f"refused {cache} Read-only file system" in lines
    # within its own sandbox the poison is what it would import: a writable cache is the channel
    assert f"found /tmp/course-cpp/{name}/{name}.so" in lines
    assert (cache / name / f"{name}.so").read_bytes() != b"poison"
    # the next kernel (a sandbox of its own) finds the grader's build and imports it
    seen = kernel_compiles(workspace, CppEmbedding.source)
    assert seen["library"] == str(cache / name / f"{name}.so") and seen["shape"] == [1, 2, 4]


def test_a_trusted_build_stops_at_its_cells_time_which_is_the_submissions_own(tmp_path, monkeypatch):
    if libtorch.missing_tools():
        pytest.skip(libtorch.explain_missing(libtorch.missing_tools()))
    monkeypatch.setattr(cpp_cache, "trusted_pch", lambda cache: None)  # the grader's own, not timed here
    monkeypatch.setattr(cpp_cache, "trusted_binding", lambda cache: tmp_path / cpp_binding.OBJECT)
    folder = cpp_submission(tmp_path / "submitted" / "cy" / CPP_LESSON, REFERENCE_CELL)
    cache = tmp_path / cpp_cache.SHARED_FOLDER
    done = cpp_cache.prebuild(folder, CPP_LESSON, cache, Limits(), cell_limit_s=1)
    [(name, why)] = done.failed.items()
    assert why == "did not compile within 1 s" and done.built == [] and done.seconds < 60, done
    # slow is not wrong: no failed mark, so the next submission of this unit is given its own time
    assert not (cpp_cache.records(cache) / f"{name}{cpp_cache.FAILED_SUFFIX}").exists()
    [line] = cpp_cache.builds_logged(cache)
    assert f"{name} failed in" in line and line.endswith(f"for {folder}")


PLANT_PCH = """
import os
from autograder import cpp_pch, libtorch
folder = os.path.join(libtorch.cache_roots()[1], cpp_pch.folder_name(libtorch.UNIT_HEAD))
try:
    os.makedirs(folder, exist_ok=True)
    open(os.path.join(folder, "course_torch.h"), "w").write("#define torch poison")
    open(os.path.join(folder, "course_torch.h.gch"), "wb").write(b"poison")
    open(os.path.join(folder, libtorch.FINISHED), "w").write("")
    print("planted")
except OSError as error:
    print("refused", error.strerror)
"""


def test_a_kernel_cannot_plant_a_precompiled_header_for_the_next_kernels(tmp_path):
    workspace = tmp_path / "workspace"
    cache = cpp_cache.shared_cache(workspace)
    attack = in_kernel_sandbox(workspace, PLANT_PCH, defended=False)
    assert attack.stdout.split() == ["planted"], attack.stderr  # without the defence: later builds read it
    assert cpp_pch.finished([cache], libtorch.UNIT_HEAD, libtorch.FINISHED) is not None
    cpp_cache.clean(workspace)
    defended = in_kernel_sandbox(workspace, PLANT_PCH)
    assert defended.stdout.split() == ["refused", "Read-only", "file", "system"], defended.stderr
    assert cpp_pch.finished([cache], libtorch.UNIT_HEAD, libtorch.FINISHED) is None


PLANT_BINDING = """
import os
from autograder import cpp_binding, libtorch
folder = os.path.join(libtorch.cache_roots()[1], cpp_binding.folder_name())
try:
    os.makedirs(folder, exist_ok=True)
    open(os.path.join(folder, cpp_binding.OBJECT), "wb").write(b"poison")
    open(os.path.join(folder, libtorch.FINISHED), "w").write("")
    print("planted")
except OSError as error:
    print("refused", error.strerror)
"""


def test_a_kernel_cannot_plant_a_binding_object_for_the_next_kernels(tmp_path):
    """The binding object is linked into every build that finds it: one planted in the shared cache
    would run a submission's code in every later kernel that builds."""
    workspace = tmp_path / "workspace"
    cache = cpp_cache.shared_cache(workspace)
    attack = in_kernel_sandbox(workspace, PLANT_BINDING, defended=False)
    assert attack.stdout.split() == ["planted"], attack.stderr  # without the defence: later builds link it
    planted = cpp_binding.finished([cache], libtorch.FINISHED)
    assert planted is not None and planted.read_bytes() == b"poison"
    assert cpp_binding.finished([tmp_path / "kernel", cache], libtorch.FINISHED) == planted
    cpp_cache.clean(workspace)
    defended = in_kernel_sandbox(workspace, PLANT_BINDING)
    assert defended.stdout.split() == ["refused", "Read-only", "file", "system"], defended.stderr
    assert cpp_binding.finished([cache], libtorch.FINISHED) is None


def test_the_clean_command_removes_the_cache_and_its_records_and_says_how_much(tmp_path, capsys):
    from autograder.__main__ import main

    cache = cpp_cache.shared_cache(tmp_path)
    (cache / "course_0123").mkdir(parents=True)
    (cache / "course_0123" / "course_0123.so").write_bytes(b"x" * 3 * 2**20)
    cpp_cache.records(cache).mkdir()
    (cpp_cache.records(cache) / cpp_cache.BUILD_LOG).write_text("a line\n")
    (tmp_path / "gradebook.db").write_text("kept")
    assert main(["--workspace", str(tmp_path), "clean-cpp-cache"]) == 0
    assert f"freed 3.0 MiB of C++ builds in {tmp_path}" in capsys.readouterr().out
    assert not cache.exists() and not cpp_cache.records(cache).exists()
    assert (tmp_path / "gradebook.db").read_text() == "kept"


def test_the_header_and_the_binding_object_are_made_at_once(tmp_path, monkeypatch):
    """A release on a fresh machine makes both at the same time (two compilers on two cores), not
    one after the other."""
    monkeypatch.setenv(cpp_cache.MACHINE_VARIABLE, str(tmp_path / "machine"))
    made, running, most = fake_trusted_builds(monkeypatch), [], []
    for module in (cpp_pch, cpp_binding):
        real = module.build

        def slow(*args, real=real):
            running.append(args[0])
            most.append(len(running))
            time.sleep(0.5)
            running.remove(args[0])
            return real(*args)

        monkeypatch.setattr(module, "build", slow)
    header, binding = cpp_cache.prepare(cpp_cache.shared_cache(tmp_path / "workspace"))
    assert header is not None and binding is not None and len(made) == 2
    assert max(most) == 2  # both compilers ran together


def test_a_second_workspace_links_the_machines_header_and_binding_object_instead_of_building_them(
    tmp_path, monkeypatch
):
    machine = tmp_path / "machine"
    monkeypatch.setenv(cpp_cache.MACHINE_VARIABLE, str(machine))
    older = machine / "pch-0123456789abcdef0123"  # this installation's header for an older torch
    older.mkdir(parents=True)
    cpp_pch.record(older)
    made = fake_trusted_builds(monkeypatch, gch=b"h" * 2**20)
    first, second = (cpp_cache.shared_cache(tmp_path / name) for name in ("first", "second"))
    header, binding = cpp_cache.prepare(first)
    assert sorted(made) == [machine / binding.parent.name, machine / header.parent.name]  # made once, there
    assert not older.exists()  # the machine keeps one header per installation
    assert cpp_cache.prepare(second) == (
        second / header.parent.name / header.name,
        second / binding.parent.name / binding.name,
    )
    assert len(made) == 2  # nothing built for the second workspace
    for cache in (first, second):
        gch = cache / header.parent.name / f"{cpp_pch.HEADER}.gch"
        assert gch.samefile(machine / header.parent.name / gch.name)  # a hard link: no copy
        assert (cache / binding.parent.name / cpp_binding.OBJECT).read_bytes() == b"object"
    [line] = (cpp_cache.records(second) / cpp_cache.PCH_LOG).read_text().splitlines()
    assert f"{header.parent.name} linked from {machine} in " in line
    [line] = (cpp_cache.records(first) / cpp_cache.PCH_LOG).read_text().splitlines()
    assert f"{header.parent.name} built in " in line
    # cleaning a workspace frees none of the bytes it shares with the machine's cache
    assert cpp_cache.clean(tmp_path / "second") < 2**20 and not second.exists()
    assert (machine / header.parent.name / f"{cpp_pch.HEADER}.gch").stat().st_size == 2**20


def test_a_grader_builds_its_own_unit_while_another_builds_the_unit_they_share(tmp_path, monkeypatch):
    """Two graders whose submissions share a unit: the one that finds it being built builds its
    other unit meanwhile instead of waiting idle, then finds the shared one finished."""
    monkeypatch.setenv(cpp_cache.MACHINE_VARIABLE, str(tmp_path / "machine"))
    fake_trusted_builds(monkeypatch)
    monkeypatch.setattr(libtorch, "missing_tools", list)  # no compiler runs: any machine will do
    built, own_built = [], threading.Event()

    def build_trusted(name, unit, cache, *_):
        (cache / name).mkdir(parents=True)
        (cache / name / libtorch.FINISHED).write_text("")
        built.append(name)
        own_built.set()

    monkeypatch.setattr(cpp_cache, "build_trusted", build_trusted)
    cells = (CppEmbedding.cell("CppEmbedding"), CppPositionwiseFeedForward.cell("CppPositionwiseFeedForward"))
    folder = cpp_submission(tmp_path / "ada" / CPP_LESSON, "import torch", *cells)
    shared, own = cpp_cache.submission_units(folder)
    cache = cpp_cache.shared_cache(tmp_path / "workspace")
    cpp_cache.prepare(cache)
    runs = []
    with cpp_pch.locked(cpp_cache.records(cache) / f"{shared}.lock"):  # another grader builds it
        grader = threading.Thread(
            target=lambda: runs.append(cpp_cache.prebuild(folder, CPP_LESSON, cache, Limits(), 60))
        )
        grader.start()
        assert own_built.wait(timeout=60) and built == [own]  # while the other holds the shared unit
        build_trusted(shared, "", cache)  # the other grader's build, finished
    grader.join()
    assert built == [own, shared] and runs[0].built == [own] and runs[0].found == [shared]
