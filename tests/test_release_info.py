"""The release the lessons install where the course is missing, and the README's Colab links."""

import re
import tomllib
from pathlib import Path

import pytest

from autograder import lessons, release_info
from autograder.authoring import build

REPOSITORY_ROOT = Path(__file__).resolve().parent.parent


def test_the_release_is_pyprojects_name_and_version_pinned_to_its_tag():
    project = tomllib.loads((REPOSITORY_ROOT / "pyproject.toml").read_text())["project"]
    assert (release_info.DISTRIBUTION, release_info.VERSION) == (project["name"], project["version"])
    assert release_info.REQUIREMENT.endswith(f"@v{project['version']}")  # a tag, never a branch


@pytest.mark.parametrize("lesson", lessons.written_lessons())
def test_every_lessons_first_code_cell_opens_with_the_pinned_install(lesson):
    specs = build.parse_script(lessons.script_path(lesson).read_text())
    first_code = next(spec for spec in specs if spec.kind != "markdown")
    source = "\n".join(first_code.lines).strip("\n") + "\n"
    assert source.startswith(release_info.install_lines()), (
        f"{lessons.script_path(lesson)}: its first code cell must open with these lines "
        f"(autograder/release_info.py writes them):\n{release_info.install_lines()}"
    )


def test_the_install_runs_only_where_the_course_is_missing(monkeypatch):
    """Run the lines with a fake pip: nothing happens where `autograder` imports (a clone, a
    pip install, grading without network); where it is missing, pip gets the pinned release."""
    import importlib.util
    import subprocess

    calls = []
    monkeypatch.setattr(subprocess, "run", lambda command, check: calls.append(command))
    exec(release_info.install_lines(), {})
    assert calls == []

    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name: None if name == "autograder" else real_find_spec(name)
    )
    exec(release_info.install_lines(), {})
    [command] = calls
    assert command[1:] == ["-m", "pip", "install", "--quiet", release_info.REQUIREMENT]


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
    assert (
        f'pip install "transformer-course[lab] @ git+https://github.com/{release_info.REPOSITORY}@{release_info.TAG}"'
        in readme
    )
