"""Which C++ compiler lesson 12 uses (autograder/cpp_pch.py), what each needs of the precompiled
header, and how a learner's cache loses the headers no build of theirs can read again. Only the
last test compiles (a small header, with each compiler installed); the others look at commands."""

import shutil
import subprocess
import sys

import pytest

from autograder import cpp_binding, cpp_pch, libtorch


def test_course_cxx_forces_a_compiler_else_clang_where_installed_else_cxx(monkeypatch):
    monkeypatch.setenv(cpp_pch.COMPILER_VARIABLE, "g++")
    assert cpp_pch.compiler() == "g++"
    monkeypatch.delenv(cpp_pch.COMPILER_VARIABLE)
    monkeypatch.setenv("CXX", "my-c++")
    real_which = shutil.which
    monkeypatch.setattr(shutil, "which", lambda name: "/usr/bin/clang++" if name == "clang++" else None)
    assert cpp_pch.compiler() == "clang++"
    monkeypatch.setattr(shutil, "which", lambda name: None)
    assert cpp_pch.compiler() == "my-c++"
    monkeypatch.setattr(shutil, "which", real_which)


@pytest.mark.skipif(not (shutil.which("clang++") and shutil.which("g++")), reason="needs clang++ and g++")
def test_each_compiler_has_its_own_header_binding_object_and_builds(monkeypatch):
    unit = libtorch.translation_unit([libtorch.cell_part("Embedding", "struct EmbeddingImpl {};")])
    names = {}
    for compiler in ("g++", "clang++"):
        monkeypatch.setenv(cpp_pch.COMPILER_VARIABLE, compiler)
        names[compiler] = (
            cpp_pch.folder_name(libtorch.UNIT_HEAD),
            cpp_binding.folder_name(),
            libtorch.build_name(unit),
        )
        assert cpp_binding.compile_command(cpp_binding.SOURCE, cpp_binding.OBJECT)[0] == compiler
    assert all(a != b for a, b in zip(names["g++"], names["clang++"], strict=True))
    header = cpp_pch.folder_name(libtorch.UNIT_HEAD)
    assert cpp_pch.is_clang() and "-fpch-validate-input-files-content" in cpp_pch.use_flags(header)
    monkeypatch.setenv(cpp_pch.COMPILER_VARIABLE, "g++")
    assert not cpp_pch.is_clang() and cpp_pch.use_flags(header) == ["-include", header, "-Winvalid-pch"]


CLANG_REFUSALS = [
    "error: input is not a PCH file: 'x/course_torch.h.gch'\n",
    "fatal error: file '/t/torch.h' has been modified since the precompiled header 'x.gch' was built\n",
    "fatal error: PCH file built from a different branch ((clang-14.0.6)) than the compiler\n",
    "fatal error: malformed or corrupted AST file: 'could not find file '/c/.pch-1/course_torch.h'\n",
]
NOT_REFUSALS = [
    "<command-line>: warning: x/course_torch.h.gch: not a valid precompiled header file [-Winvalid-pch]\n",
    "Embedding/your_cell.cpp:7:24: error: use of undeclared identifier 'undeclared_scale'\n",
]


def test_a_header_clang_refuses_is_told_from_the_learners_error():
    assert all(cpp_pch.refused(log) for log in CLANG_REFUSALS)
    assert not any(cpp_pch.refused(log) for log in NOT_REFUSALS)


@pytest.mark.parametrize(("log", "tries"), [(CLANG_REFUSALS[0], 2), (NOT_REFUSALS[1], 1), ("", 1)])
def test_a_refused_header_is_built_without_and_a_learners_error_is_not_built_twice(
    tmp_path, monkeypatch, log, tries
):
    ran = []

    def run_within(commands, limit_s):
        ran.append(commands[0])
        return (log, 1 if log else 0) if len(ran) == 1 else ("", 0)

    monkeypatch.setattr(libtorch, "run_within", run_within)
    header, binding = tmp_path / "pch" / cpp_pch.HEADER, tmp_path / cpp_binding.OBJECT
    libtorch.compile_and_link(tmp_path, "course_0123", header, binding, 60)
    assert len(ran) == tries and "-include" in ran[0]
    assert tries == 1 or "-include" not in ran[1]  # the second reads the headers themselves


def made(root, name, by=None):
    (root / name).mkdir(parents=True)
    (root / name / libtorch.FINISHED).write_text("")
    if by is not None:
        (root / name / cpp_pch.MADE_FOR).write_text(str(by))
    return root / name


def test_a_learners_new_header_removes_only_what_this_installation_cannot_use(tmp_path, capsys):
    cache, other_install = tmp_path / "cache", tmp_path / "other-venv"
    other_install.mkdir()
    header = made(cache, "pch-new", sys.prefix)
    binding = made(cache, "binding-new", sys.prefix)
    gone = [
        made(cache, "pch-older-torch", sys.prefix),  # this install, another torch, flags or compiler
        made(cache, "binding-older", sys.prefix),
        made(cache, "pch-before-records"),  # made before folders named their maker
        made(cache, "pch-removed-install", tmp_path / "deleted-venv"),
    ]
    kept = [
        header,
        binding,
        made(cache, "pch-other-install", other_install),  # it may share this cache: its own
        made(cache, "binding-other-install", other_install),
        made(cache, "course_0123"),  # a learner's build
    ]
    libtorch.prune_old_headers(header, binding)
    assert all(folder.is_dir() for folder in kept)
    assert not any(folder.exists() for folder in gone)
    assert f"removed 4 older precompiled headers and objects from {cache}" in capsys.readouterr().out
    libtorch.prune_old_headers(header, binding)
    assert capsys.readouterr().out == ""  # nothing left to remove: nothing said


def test_only_a_learners_first_build_prunes_their_cache(tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    monkeypatch.setenv(cpp_pch.MACHINE_VARIABLE, str(tmp_path / "none"))  # a machine that grades nothing
    old = made(cache, "pch-older-torch", sys.prefix)
    binding = made(cache, cpp_binding.folder_name(), sys.prefix)
    monkeypatch.setattr(libtorch, "cache_roots", lambda: [cache])
    monkeypatch.setattr(cpp_binding, "for_build", lambda roots, mark, limit_s: binding / cpp_binding.OBJECT)
    monkeypatch.setattr(
        cpp_pch,
        "build",
        lambda folder, head, mark, limit_s: made(folder.parent, folder.name) / cpp_pch.HEADER,
    )
    monkeypatch.setattr(libtorch, "compile_and_link", lambda *args: None)  # past the limit: no compiler run
    monkeypatch.setenv(libtorch.CACHE_VARIABLE, str(cache))  # a grading kernel: it makes no header
    part = libtorch.cell_part("Embedding", "struct EmbeddingImpl {};")
    unit = libtorch.translation_unit([part])
    with pytest.raises(libtorch.CompileError, match="did not compile within"):
        libtorch.build_library(libtorch.build_name(unit), unit, [part])
    assert old.is_dir()
    monkeypatch.delenv(libtorch.CACHE_VARIABLE)  # a learner's machine: the first build makes one
    with pytest.raises(libtorch.CompileError, match="did not compile within"):
        libtorch.build_library(libtorch.build_name(unit), unit, [part])
    assert (
        not old.exists() and binding.is_dir() and (cache / cpp_pch.folder_name(libtorch.UNIT_HEAD)).is_dir()
    )


@pytest.mark.parametrize("compiler", ["clang++", "g++"])
def test_a_header_made_in_a_staging_folder_is_read_where_it_lands(tmp_path, monkeypatch, compiler):
    if shutil.which(compiler) is None:
        pytest.skip(f"no {compiler}")
    monkeypatch.setenv(cpp_pch.COMPILER_VARIABLE, compiler)
    head = ["#include <vector>"]
    header = cpp_pch.build(tmp_path / "pch-small", head, libtorch.FINISHED, 120)
    unit = tmp_path / "unit.cpp"
    unit.write_text("int size() { return std::vector<int>(3).size(); }\n")  # <vector> from the header only
    command = [compiler, *cpp_pch.flags(), *cpp_pch.use_flags(header), "-c", str(unit), "-o", f"{unit}.o"]
    done = subprocess.run(command, capture_output=True, text=True)
    assert done.returncode == 0 and not cpp_pch.refused(done.stderr), done.stderr
    assert "not a valid precompiled header" not in done.stderr  # g++'s word when it reads the headers
