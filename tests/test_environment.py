"""The two install routes pin the same packages: requirements.txt (pip) and environment.yml (conda)."""

from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]


def requirement_lines() -> list[str]:
    lines = []
    for raw in (ROOT / "requirements.txt").read_text().splitlines():
        line = raw.split("#", 1)[0].strip()  # drop comments, whole-line or trailing
        if line:
            lines.append(line)
    return lines


@pytest.fixture(scope="module")
def environment() -> dict:
    with open(ROOT / "environment.yml") as handle:
        env = yaml.safe_load(handle)
    assert isinstance(env, dict), "environment.yml must be a mapping"
    return env


def conda_dependencies(env: dict) -> list:
    dependencies = env.get("dependencies")
    assert isinstance(dependencies, list), "environment.yml needs a 'dependencies' list"
    return dependencies


def pip_section(env: dict) -> list[str]:
    sections = [dep["pip"] for dep in conda_dependencies(env) if isinstance(dep, dict) and "pip" in dep]
    assert len(sections) == 1, f"expected exactly one 'pip:' section in dependencies, found {len(sections)}"
    assert all(isinstance(item, str) for item in sections[0])
    return [item.strip() for item in sections[0]]


def test_requirements_txt_is_not_empty_and_has_no_duplicates():
    lines = requirement_lines()
    assert lines, "requirements.txt lists no packages"
    names = [line.split("=")[0].split("<")[0].split(">")[0].strip().lower() for line in lines]
    assert len(names) == len(set(names)), f"a package is listed twice: {names}"


def test_environment_yml_is_a_conda_env_file(environment):
    assert isinstance(environment.get("name"), str) and environment["name"], "needs a non-empty 'name'"
    channels = environment.get("channels")
    assert isinstance(channels, list) and channels and all(isinstance(c, str) for c in channels)
    conda_specs = [dep for dep in conda_dependencies(environment) if isinstance(dep, str)]
    assert "python=3.11" in conda_specs, f"python must be pinned to 3.11, got {conda_specs}"
    assert "pip" in conda_specs, "pip must be a conda dependency for the 'pip:' section to install"
    unknown = [dep for dep in conda_dependencies(environment) if not isinstance(dep, str | dict)]
    assert not unknown, f"dependencies must be strings or a pip mapping, got {unknown}"


def test_environment_yml_pip_section_equals_requirements_txt(environment):
    pip = pip_section(environment)
    requirements = requirement_lines()
    assert len(pip) == len(set(pip)), f"a line repeats in environment.yml's pip list: {pip}"
    assert sorted(pip) == sorted(requirements), (  # the order of the lines does not matter
        "environment.yml's pip list and requirements.txt differ:\n"
        f"  only in environment.yml: {sorted(set(pip) - set(requirements))}\n"
        f"  only in requirements.txt: {sorted(set(requirements) - set(pip))}"
    )


def test_torch_is_pinned_to_2_13(environment):
    for source, lines in (
        ("requirements.txt", requirement_lines()),
        ("environment.yml", pip_section(environment)),
    ):
        torch_lines = [line for line in lines if line.lower().startswith("torch") and line[5:6] in "=<>!~ "]
        assert torch_lines == ["torch==2.13.*"], f"{source}: torch pin is {torch_lines}"
