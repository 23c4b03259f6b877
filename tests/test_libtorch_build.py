"""How lesson 12 builds a learner's C++: the messages of a failed build, the compile-time limit, and
a cache that may be read-only (autograder/libtorch.py).

One real compile fails here (a C++ error, about 15 s: the compiler reads torch's headers before it
meets the error), and one build is stopped by a limit of one second. Builds go to a temporary cache.
"""

import os

import pytest

from autograder import libtorch
from autograder.checks import CheckFailure
from autograder.checks import libtorch as checks

BROKEN = """
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


@pytest.fixture
def private_cache(tmp_path, monkeypatch):
    if libtorch.missing_tools():
        pytest.skip(libtorch.explain_missing(libtorch.missing_tools()))
    monkeypatch.setenv(libtorch.CACHE_VARIABLE, str(tmp_path))
    return tmp_path


def test_a_compile_error_names_its_line_in_the_cell_and_reaches_the_checks(private_cache, capsys):
    cls = libtorch.compile_module("Embedding", BROKEN)
    said = capsys.readouterr().err
    assert "line 7 of the C++ source" in said, said  # line 1 is the line of r\"\"\"
    assert "return lut(tokens) * undeclared_scale;" in said and "undeclared_scale" in said
    with pytest.raises(CheckFailure, match="CompileError.*line 7"):
        checks.check_cpp_embedding(cls)
    assert not list(private_cache.glob(f"*/{libtorch.FINISHED}"))  # a failed build is never reused


def test_a_build_past_the_limit_is_stopped_with_a_message(private_cache, monkeypatch):
    monkeypatch.setenv(libtorch.LIMIT_VARIABLE, "1")
    source = BROKEN.replace("undeclared_scale", "2.0")
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
    cls = libtorch.compile_module("Embedding", BROKEN.replace("undeclared_scale", "3.0"))
    assert "sudo apt-get install g++ ninja-build python3-dev" in capsys.readouterr().err
    with pytest.raises(libtorch.CompilerMissing, match="lacks a C\\+\\+ compiler"):
        cls(5, 4)
