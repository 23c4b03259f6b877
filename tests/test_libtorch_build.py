"""How lesson 12 builds a learner's C++: the messages of a failed build, the compile-time limit, and
a cache that may be read-only (autograder/libtorch.py).

One real compile fails here (a C++ error, about 15 s: the compiler reads torch's headers before it
meets the error, here past a precompiled header that is not one), and one build is stopped by a
limit of one second. Builds go to a temporary cache, with the binding object in a second one (the
grader's, from the run's machine cache: ``cpp_cache.trusted_binding``), as a grading kernel reads
the grader's. One learner's class derived from torch's ``LinearImpl`` is built twice, with the
header's explicit instantiations and without them.
"""

import os
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
import torch

from autograder import cpp_binding, cpp_pch, cpp_probe, libtorch
from autograder.checks import CheckFailure
from autograder.checks import libtorch as checks
from autograder.cpp_probe import CppCrashed
from autograder.engine import cpp_cache
from solutions.libtorch import CppEmbedding
from tests.helpers import BROKEN_CPP


@pytest.fixture(scope="module")
def binding_cache(tmp_path_factory):
    """A cache that holds only the binding object, made once for this file."""
    if libtorch.missing_tools():
        pytest.skip(libtorch.explain_missing(libtorch.missing_tools()))
    root = tmp_path_factory.mktemp("binding")
    cpp_cache.records(root).mkdir()
    assert cpp_cache.trusted_binding(root) is not None  # the grader's, from the machine's cache
    return root


@pytest.fixture
def private_cache(tmp_path, monkeypatch, binding_cache):
    monkeypatch.setenv(libtorch.CACHE_VARIABLE, f"{tmp_path}{os.pathsep}{binding_cache}")
    return tmp_path


def plant_pch(root, gch: bytes):
    """A finished precompiled header in cache ``root`` whose .gch holds ``gch``."""
    folder = root / cpp_pch.folder_name(libtorch.UNIT_HEAD)
    folder.mkdir(parents=True)
    (folder / cpp_pch.HEADER).write_text("\n".join(libtorch.UNIT_HEAD) + "\n")
    (folder / f"{cpp_pch.HEADER}.gch").write_bytes(gch)
    (folder / libtorch.FINISHED).write_text("")
    return folder / cpp_pch.HEADER


def test_a_compile_error_names_its_line_in_the_cell_and_reaches_the_checks(
    private_cache, capsys, monkeypatch
):
    plant_pch(private_cache, b"not a precompiled header")  # the compiler reads the headers instead
    started = []  # the trial process a build starts before it compiles
    monkeypatch.setattr(
        libtorch, "start_trial", lambda: started.append(cpp_probe.start_trial()) or started[-1]
    )
    cls = libtorch.compile_module("Embedding", BROKEN_CPP)
    assert len(started) == 1 and started[0].poll() == -9  # killed with the build: never left waiting
    said = capsys.readouterr().err
    assert "line 7 of the C++ source" in said, said  # line 1 is the line of r\"\"\"
    assert "return lut(tokens) * undeclared_scale;" in said and "undeclared_scale" in said
    with pytest.raises(CheckFailure, match="CompileError.*line 7"):
        checks.check_cpp_embedding(cls)
    assert not list(private_cache.glob(f"course_*/{libtorch.FINISHED}"))  # a failed build is never reused


def test_a_build_past_the_limit_is_stopped_with_a_message(private_cache, monkeypatch):
    monkeypatch.setenv(libtorch.LIMIT_VARIABLE, "1")
    source = BROKEN_CPP.replace("undeclared_scale", "2.0")
    with pytest.raises(libtorch.CompileError, match="did not compile within 1 s"):
        libtorch.compile_parts([libtorch.Part("Embedding", "Embedding", source)])


def test_a_finished_build_is_found_in_any_cache_and_only_when_finished(tmp_path, monkeypatch):
    private, shared = tmp_path / "private", tmp_path / "shared"
    monkeypatch.setenv(libtorch.CACHE_VARIABLE, f"{private}{os.pathsep}{shared}")
    name = "course_0123"
    (shared / name).mkdir(parents=True)
    (shared / name / f"{name}.so").write_bytes(b"")
    assert libtorch.finished_library(name) is None  # a library without its mark may be half written
    (shared / name / libtorch.FINISHED).write_text("unit")
    assert libtorch.finished_library(name) == shared / name / f"{name}.so"
    assert libtorch.cache_roots()[0] == private  # where new builds go


def test_a_missing_compiler_is_explained(monkeypatch, capsys):
    monkeypatch.setattr(libtorch, "missing_tools", lambda: ["a C++ compiler (g++)"])
    monkeypatch.setattr(libtorch, "finished_library", lambda name: None)
    cls = libtorch.compile_module("Embedding", BROKEN_CPP.replace("undeclared_scale", "3.0"))
    assert "sudo apt-get install g++ ninja-build python3-dev" in capsys.readouterr().err
    with pytest.raises(libtorch.CompilerMissing, match="lacks a C\\+\\+ compiler"):
        cls(5, 4)


def test_a_grading_kernel_never_makes_a_precompiled_header_and_a_learner_makes_one_once(
    tmp_path, monkeypatch, capsys
):
    made = []

    def build(folder, head, mark, limit_s):
        made.append(folder)
        return plant_pch(folder.parent, b"made")

    monkeypatch.setattr(cpp_pch, "build", build)
    head, mark = libtorch.UNIT_HEAD, libtorch.FINISHED
    assert cpp_pch.for_build([tmp_path / "kernel", tmp_path / "shared"], head, mark, 60, make=False) is None
    assert made == []  # a kernel (COURSE_CPP_CACHE set) builds without one, and writes nothing
    learner = [tmp_path / "home"]
    header = cpp_pch.for_build(learner, head, mark, 60, make=True)
    assert made == [tmp_path / "home" / cpp_pch.folder_name(head)] and header == made[0] / cpp_pch.HEADER
    assert "first C++ build on this machine precompiles torch's headers once" in capsys.readouterr().out
    assert cpp_pch.for_build(learner, head, mark, 60, make=True) == header and len(made) == 1
    # one the grader made in the shared cache is what a kernel reads
    shared = plant_pch(tmp_path / "shared", b"grader's")
    assert cpp_pch.for_build([tmp_path / "kernel", tmp_path / "shared"], head, mark, 60, make=False) == shared


def test_two_first_builds_at_once_make_the_header_and_the_binding_once(tmp_path, monkeypatch):
    """Two notebooks (or two test workers) that start their first build together: one makes the
    precompiled header and the binding object, the other waits for them and makes neither (each
    made both before, minutes of the compiler twice)."""
    made = []

    def slow_pch(folder, head, mark, limit_s):
        made.append("header")
        time.sleep(0.5)
        return plant_pch(folder.parent, b"made")

    def slow_binding(folder, mark, limit_s):
        made.append("binding")
        time.sleep(0.5)
        folder.mkdir(parents=True)
        (folder / cpp_binding.OBJECT).write_bytes(b"made")
        (folder / mark).write_text("")
        return folder / cpp_binding.OBJECT

    monkeypatch.setattr(cpp_pch, "build", slow_pch)
    monkeypatch.setattr(cpp_binding, "build", slow_binding)
    roots, head, mark = [tmp_path / "home"], libtorch.UNIT_HEAD, libtorch.FINISHED

    def first_build():
        return cpp_pch.for_build(roots, head, mark, 60, make=True), cpp_binding.for_build(roots, mark, 60)

    with ThreadPoolExecutor(2) as pool:
        found = [future.result() for future in [pool.submit(first_build) for _ in range(2)]]
    assert sorted(made) == ["binding", "header"]
    assert found[0] == found[1] and all(path.is_file() for path in found[0])


def test_a_build_reads_the_precompiled_header_before_the_unit_and_links_the_binding(tmp_path):
    header, binding = tmp_path / "pch" / cpp_pch.HEADER, tmp_path / cpp_binding.OBJECT
    compile_unit, link = libtorch.build_commands(tmp_path, "course_0123", header, binding)
    assert compile_unit[-4:] == ["-c", str(tmp_path / "unit.cpp"), "-o", str(tmp_path / "course_0123.o")]
    at = compile_unit.index("-include")
    assert compile_unit[at : at + 3] == ["-include", str(header), "-Winvalid-pch"]
    assert "-DTORCH_EXTENSION_NAME=course_0123" in compile_unit  # the name of its PyInit
    assert "-DTORCH_API_INCLUDE_EXTENSION_H" not in compile_unit  # torch/torch.h without Python
    assert link[1:3] == [str(tmp_path / "course_0123.o"), str(binding)]
    assert link[-2:] == ["-o", str(tmp_path / "course_0123.so")]
    compile_unit, _ = libtorch.build_commands(tmp_path, "course_0123", None, binding)
    assert "-include" not in compile_unit and "-Winvalid-pch" not in compile_unit


def test_a_unit_holds_no_python_and_hands_each_part_to_the_binding():
    unit = libtorch.translation_unit([libtorch.Part("Mine", "MultiHeadAttention", "struct X {};")])
    assert unit.startswith("#include <torch/torch.h>\n") and "extension.h" not in unit
    assert "PYBIND11" not in unit and "py::" not in unit
    assert "using Impl = course_Mine::MultiHeadAttentionImpl;" in unit
    assert '{.label = "Mine", .MultiHeadAttention = &course_glue_Mine::calls}' in unit
    assert "PyInit_course_binding()" in unit and "py::" in cpp_binding.source()


CRASHING = """
#include <csignal>
struct EmbeddingImpl : torch::nn::Module {
  EmbeddingImpl(int64_t vocab_size, int64_t d_model) {
    lut = register_module("lut", torch::nn::Embedding(vocab_size, d_model));
  }
  torch::Tensor forward(torch::Tensor tokens) {
    std::raise(SIGSEGV);  // what a read past a tensor's end does, without the luck
    return lut(tokens);
  }
  torch::nn::Embedding lut{nullptr};
};
"""

IMPORT_AND_CALL = """
import sys, torch
from pathlib import Path
from autograder.cpp_probe import import_library
module = import_library(sys.argv[1], Path(sys.argv[2]))
module.Embedding(11, 8).forward(torch.zeros(2, 3, dtype=torch.long))
print("survived")
"""


def test_a_build_that_crashes_is_refused_with_its_signal_and_the_kernel_lives(
    private_cache, capsys, monkeypatch
):
    """One compile, the slowest test of this file. Without the trial (the library imported and called
    where the learner's kernel runs), the process dies of SIGSEGV; with it, the build is refused, the checks
    report CppCrashed naming the signal, and this process, standing for the kernel, goes on."""
    import shutil
    import signal
    import subprocess
    import sys

    kept, trial = private_cache / "kept", libtorch.try_build

    def keeping(name, library, *args, **kwargs):  # a copy of what the trial is about to refuse
        kept.mkdir(exist_ok=True)
        shutil.copy(library, kept / library.name)
        return trial(name, library, *args, **kwargs)

    monkeypatch.setattr(libtorch, "try_build", keeping)
    cls = libtorch.compile_module("Embedding", CRASHING)
    said = capsys.readouterr().err
    assert "killed a test process with SIGSEGV (your kernel was spared)" in said, said
    with pytest.raises(CheckFailure, match="CppCrashed.*SIGSEGV"):
        checks.check_cpp_embedding(cls)
    assert not list(private_cache.glob(f"course_*/{libtorch.FINISHED}"))  # never cached as good

    assert not list(private_cache.glob("*course_*"))  # the refused build's staging folder is gone
    [library] = kept.glob("course_*.so")  # built, refused: what a kernel would import
    undefended = subprocess.run(
        [sys.executable, "-c", IMPORT_AND_CALL, library.stem, str(library)], capture_output=True, text=True
    )
    assert undefended.returncode == -signal.SIGSEGV and "survived" not in undefended.stdout


def test_a_build_is_published_whole_and_a_second_builder_of_the_same_unit_keeps_the_first(tmp_path):
    """Builds are made in a staging folder and renamed into place finished: a process that finishes
    the same unit second keeps the first one's library (never half of each); a folder left without
    its finished mark (an interrupted build) is replaced."""

    def staged(label: str) -> object:
        staging = tmp_path / f".course_x-{label}"
        staging.mkdir()
        (staging / "course_x.so").write_text(label)
        (staging / libtorch.FINISHED).write_text("unit")
        return staging

    final = tmp_path / "course_x"
    assert libtorch.published(staged("first"), final, "course_x") == final / "course_x.so"
    assert libtorch.published(staged("second"), final, "course_x") == final / "course_x.so"
    assert (final / "course_x.so").read_text() == "first"
    interrupted = tmp_path / "course_y"
    interrupted.mkdir()
    (interrupted / "course_y.so").write_text("half")
    staging = tmp_path / ".course_y-new"
    staging.mkdir()
    (staging / "course_y.so").write_text("whole")
    (staging / libtorch.FINISHED).write_text("unit")
    assert libtorch.published(staging, interrupted, "course_y").read_text() == "whole"


DERIVED_CPP = r"""
struct Wider : torch::nn::LinearImpl {  // the learner's own class, derived from torch's module
  using LinearImpl::LinearImpl;
};

struct EmbeddingImpl : torch::nn::Module {
  EmbeddingImpl(int64_t vocab_size, int64_t d_model) {
    lut = register_module("lut", torch::nn::Embedding(vocab_size, d_model));
    wider = register_module("wider", std::make_shared<Wider>(d_model, d_model));
  }
  torch::Tensor forward(torch::Tensor tokens) { return wider->forward(lut(tokens)); }
  torch::nn::Embedding lut{nullptr};
  std::shared_ptr<Wider> wider;
};
"""


def test_a_class_derived_from_torchs_module_links_the_instantiations_the_header_declares_extern(
    tmp_path, monkeypatch
):
    assert cpp_pch.listed_instances(), "for another torch: python -m autograder.authoring.torch_instances"
    shared = tmp_path / "shared"
    header, _ = cpp_cache.prepare(shared)
    assert header is not None and "extern template class torch::nn::Cloneable<" in header.read_text()
    assert cpp_pch.linked(header) == [str(header.with_name(cpp_pch.INSTANCES))]
    monkeypatch.setenv(libtorch.CACHE_VARIABLE, f"{tmp_path / 'without'}{os.pathsep}{shared}")
    with monkeypatch.context() as patch:
        patch.setattr(cpp_pch, "linked", lambda header: [])  # the archive left out of the link
        unbuilt = libtorch.compile_module("Embedding", DERIVED_CPP)  # stands for the failed build
        with pytest.raises(CppCrashed, match="could not be tried(.|\n)*undefined symbol.*Cloneable"):
            unbuilt(10, 4)
    monkeypatch.setenv(libtorch.CACHE_VARIABLE, f"{tmp_path / 'with'}{os.pathsep}{shared}")
    embedding = libtorch.compile_module("Embedding", DERIVED_CPP)(10, 4)
    assert embedding(torch.tensor([[1, 2]])).shape == (1, 2, 4)


def test_a_list_that_does_not_fit_this_torch_gives_a_plain_header_and_no_archive(tmp_path, monkeypatch):
    written = []

    def precompile(folder, head, extern, limit_s):
        if extern:
            raise RuntimeError("error: no member named 'GoneImpl' in namespace 'torch::nn'")
        written.append(list(extern))
        (folder / cpp_pch.HEADER).write_text(cpp_pch.text(head, extern))
        (folder / f"{cpp_pch.HEADER}.gch").write_bytes(b"gch")

    monkeypatch.setattr(cpp_pch, "listed_instances", lambda: ["torch::nn::Cloneable<torch::nn::GoneImpl>"])
    monkeypatch.setattr(cpp_pch, "_precompile", precompile)
    header = cpp_pch.build(tmp_path / "pch", libtorch.UNIT_HEAD, libtorch.FINISHED, 60)
    assert written == [[]] and header.read_text() == "\n".join(libtorch.UNIT_HEAD) + "\n"
    assert cpp_pch.linked(header) == [] and not header.with_name(cpp_pch.INSTANCES).exists()
    monkeypatch.undo()  # the real listed_instances, reading a list of the test's
    listed = tmp_path / "torch_instances.txt"
    monkeypatch.setattr(cpp_pch, "INSTANCES_LIST", listed)
    listed.write_text("# torch 1.0.0\ntorch::nn::Cloneable<torch::nn::LinearImpl>\n")
    assert cpp_pch.listed_instances() == []  # a list for another version is not read
    listed.write_text(f"# torch {cpp_pch.torch_release()}\ntorch::nn::Cloneable<torch::nn::LinearImpl>\n")
    assert cpp_pch.listed_instances() == ["torch::nn::Cloneable<torch::nn::LinearImpl>"]


def test_the_list_of_instances_keeps_torchs_class_templates_only():
    from autograder.authoring.torch_instances import class_of

    assert (
        class_of("torch::nn::Cloneable<torch::nn::LinearImpl>::clone")
        == "torch::nn::Cloneable<torch::nn::LinearImpl>"
    )
    assert class_of("c10::SingleElementType<c10::TypeKind::ListType, c10::ListType>::equals") == (
        "c10::SingleElementType<c10::TypeKind::ListType, c10::ListType>"
    )
    assert class_of("torch::nn::Module::register_module<torch::nn::EmbeddingImpl>") is None  # not a template
    assert class_of("std::vector<at::Tensor>::push_back") is None  # not torch's


def test_a_learners_build_on_a_machine_that_grades_reads_the_graders_header_and_makes_none(
    tmp_path, monkeypatch, capsys
):
    header, binding = cpp_cache.prepare(tmp_path / "workspace" / cpp_cache.SHARED_FOLDER)
    machine = cpp_pch.machine_cache()
    assert machine is not None and header.samefile(machine / header.parent.name / header.name)
    monkeypatch.delenv(libtorch.CACHE_VARIABLE, raising=False)  # a learner's notebook
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "learner"))  # where torch puts its builds
    learner = libtorch.cache_roots()[0]
    source = CppEmbedding.source + f"\n// {tmp_path.name}\n"  # a unit this process has not imported
    embedding = libtorch.compile_module("Embedding", source)(10, 4)
    assert embedding(torch.tensor([[1, 2]])).shape == (1, 2, 4)
    unit = libtorch.translation_unit([libtorch.cell_part("Embedding", source)])
    assert sorted(os.listdir(learner)) == [libtorch.build_name(unit)]  # no header, no binding object
    assert "precompiles torch's headers" not in capsys.readouterr().out
