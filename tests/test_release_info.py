"""The release the lessons install where the course is missing (its wheel, with no git), what a failed
install does to a notebook, and the README's Colab links and install routes."""

import contextlib
import re
import tomllib
from pathlib import Path

import nbformat
import pytest
from packaging.utils import canonicalize_name
from packaging.version import Version

from autograder import lessons, release_info
from autograder.authoring import build

REPOSITORY_ROOT = Path(__file__).resolve().parent.parent


def test_the_release_is_pyprojects_wheel_attached_to_its_tag():
    project = tomllib.loads((REPOSITORY_ROOT / "pyproject.toml").read_text())["project"]
    assert (release_info.DISTRIBUTION, release_info.VERSION) == (project["name"], project["version"])
    # the wheel's file name as the wheel format spells it (what `pip wheel .` writes)
    spelled = canonicalize_name(project["name"]).replace("-", "_")
    assert release_info.WHEEL == f"{spelled}-{Version(project['version'])}-py3-none-any.whl"
    assert release_info.REQUIREMENT == (
        f"{project['name']} @ https://github.com/{release_info.REPOSITORY}/releases/download/"
        f"v{project['version']}/{release_info.WHEEL}"
    )  # a tag, never a branch; a file pip installs without git
    assert "git+" not in release_info.install_lines()


@pytest.mark.parametrize("lesson", lessons.written_lessons())
def test_every_lessons_first_code_cell_is_the_install_cell_and_opens_with_the_install(lesson):
    specs = build.parse_script(lessons.script_path(lesson).read_text())
    code = [spec for spec in specs if spec.kind != "markdown"]
    assert code[0].kind == "install", (
        f"{lessons.script_path(lesson)}: its first code cell must be '# %% install'"
    )
    assert [spec.kind for spec in code[1:]].count("install") == 0, "only the first code cell installs"
    first_cell = next(cell for cell in build.build_cells(specs) if cell.cell_type == "code")
    assert first_cell.source.startswith(release_info.install_lines())
    assert not first_cell.source.removeprefix(release_info.install_lines()).startswith("\n\n")


class _FreshRuntime:
    """Stand-ins for a runtime without the course: ``find_spec("autograder")`` is None until a
    (fake) pip exits with ``status`` and, when ``installs``, the course is then found."""

    def __init__(self, monkeypatch, *, status: int, installs: bool) -> None:
        import importlib.util
        import subprocess

        self.commands: list[list[str]] = []
        self.installed = False
        real_find_spec = importlib.util.find_spec

        def pip(command):
            self.commands.append(command)
            self.installed = installs
            return subprocess.CompletedProcess(command, status)

        def find_spec(name):
            return real_find_spec(name) if name != "autograder" or self.installed else None

        monkeypatch.setattr(subprocess, "run", pip)
        monkeypatch.setattr(importlib.util, "find_spec", find_spec)


def test_the_install_runs_only_where_the_course_is_missing(monkeypatch):
    """Nothing happens where `autograder` imports (a clone, a pip install, grading without network);
    where it is missing, pip gets the release's wheel and the lesson goes on."""
    import subprocess

    monkeypatch.setattr(subprocess, "run", lambda command: pytest.fail(f"pip ran: {command}"))
    exec(release_info.install_lines(), {})

    runtime = _FreshRuntime(monkeypatch, status=0, installs=True)
    exec(release_info.install_lines(), {})
    [command] = runtime.commands
    assert command[1:] == ["-m", "pip", "install", "--quiet", release_info.REQUIREMENT]


@pytest.mark.parametrize(
    ("status", "installs"),
    [(1, False), (0, False)],  # pip failed (no release, no network); pip "succeeded" elsewhere
    ids=["pip-failed", "installed-out-of-sight"],
)
def test_a_failed_install_stops_with_one_message_the_command_and_restart(monkeypatch, status, installs):
    _FreshRuntime(monkeypatch, status=status, installs=installs)
    with pytest.raises(RuntimeError) as raised:
        exec(release_info.install_lines(), {})
    message = str(raised.value)
    assert message.startswith(f"Installing the course failed (pip exited with status {status};")
    assert f'%pip install "{release_info.REQUIREMENT}"' in message
    assert "restart the runtime" in message


def test_keep_going_leaves_only_the_install_cell_untagged():
    from autograder.engine.keep_going import KEEP_GOING, KeepGoing

    cells = [nbformat.v4.new_code_cell(release_info.install_lines() + "\nimport math\n")]
    cells += [nbformat.v4.new_code_cell("x = math.pi\n"), nbformat.v4.new_markdown_cell("prose")]
    tagged = [KeepGoing().preprocess_cell(cell, {}, index)[0] for index, cell in enumerate(cells)]
    assert [KEEP_GOING in cell.metadata.get("tags", []) for cell in tagged] == [False, True, False]


def _notebook(*sources: str) -> nbformat.NotebookNode:
    """A fresh runtime's first cell (no course; pip fails), then the given code cells."""
    fresh_runtime = (
        "import importlib.util, subprocess\n"
        "real_find_spec = importlib.util.find_spec\n"
        "importlib.util.find_spec = lambda name, *a: (\n"
        "    None if name == 'autograder' else real_find_spec(name, *a)\n"
        ")\n"
        "subprocess.run = lambda command, **kw: subprocess.CompletedProcess(command, 1)\n"
    )
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(source) for source in (fresh_runtime, *sources)]
    return nb


def _run_all(nb: nbformat.NotebookNode) -> list[str]:
    """Run All as Jupyter's clients do (stop at an error unless the cell is tagged raises-exception);
    the error names of every cell's outputs, "" for a cell that ran cleanly, None for one never run."""
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError

    from autograder.engine.nbgrader_config import local_sockets

    with contextlib.suppress(CellExecutionError):
        NotebookClient(nb, timeout=120, kernel_name="python3", config=local_sockets()).execute()
    return [
        None if cell.execution_count is None else "".join(o.get("ename", "") for o in cell.outputs)
        for cell in nb.cells
    ]


def test_run_all_stops_at_a_failed_install_with_one_message_and_no_nameerrors():
    """The learner's Run All, in nbclient (JupyterLab applies the same rule: it stops after an error
    unless the cell carries raises-exception). With the install cell tagged like every other cell,
    as before, the failed install is followed by a NameError in the next cell; untagged, as
    KeepGoing leaves it now, Run All stops at the install cell's one message."""
    from autograder.engine.keep_going import KEEP_GOING, KeepGoing

    cells = (release_info.install_lines() + "\nimport math\n", "print(math.pi)\n")
    before = _notebook(*cells)
    for cell in before.cells[1:]:
        cell.metadata["tags"] = [KEEP_GOING]
    assert _run_all(before) == ["", "RuntimeError", "NameError"]

    now = _notebook(*cells)
    now.cells = [KeepGoing().preprocess_cell(cell, {}, index)[0] for index, cell in enumerate(now.cells)]
    now.cells[0].metadata.pop("tags")  # the stand-in cell only sets the scene
    assert _run_all(now) == ["", "RuntimeError", None]
    [error] = [o for o in now.cells[1].outputs if o.output_type == "error"]
    assert "restart the runtime" in error.evalue and release_info.REQUIREMENT in error.evalue


def test_every_colab_link_opens_a_notebook_of_the_course_at_the_release_tag():
    for lesson in lessons.LESSON_NAMES:
        url = release_info.colab_url(lesson)
        prefix = (
            f"https://colab.research.google.com/github/{release_info.REPOSITORY}/blob/{release_info.TAG}/"
        )
        assert url.startswith(prefix)
        path = url.removeprefix(prefix)
        assert (REPOSITORY_ROOT / path).is_file(), f"{url} opens {path}, which the repository lacks"
        assert path.startswith(f"course/{lesson}/") and path.endswith(".ipynb")


def test_the_readme_table_has_one_colab_link_per_lesson_in_order():
    table = release_info.colab_table()
    linked = re.findall(r"^\| `(\w+)` \| \[!\[Open in Colab\]\([^)]+\)\]\(([^)]+)\) \|$", table, re.MULTILINE)
    assert linked == [(lesson, release_info.colab_url(lesson)) for lesson in lessons.LESSON_NAMES]


def test_the_readme_shows_every_lessons_colab_link_and_the_pinned_install():
    readme = (REPOSITORY_ROOT / "README.md").read_text()
    assert release_info.colab_table() in readme
    assert f'pip install "transformer-course[lab] @ {release_info.WHEEL_URL}"' in readme
    assert "git+" not in readme


def test_the_readme_says_the_release_does_not_exist_yet_and_gives_the_local_wheel_and_the_cpu_torch():
    readme = " ".join((REPOSITORY_ROOT / "README.md").read_text().split())
    assert "Until the first release, that address and the Colab links below lead nowhere." in readme
    assert f"`{release_info.REPOSITORY}` and its tag `{release_info.TAG}`, and neither exists yet" in readme
    assert f"python -m pip wheel --no-deps . -w dist # writes dist/{release_info.WHEEL}" in readme
    assert f'pip install "dist/{release_info.WHEEL}[lab]"' in readme
    assert "pip install torch --index-url https://download.pytorch.org/whl/cpu" in readme
    assert "one wheel of 192 MB" in readme  # torch 2.13.0+cpu for CPython 3.11, measured
