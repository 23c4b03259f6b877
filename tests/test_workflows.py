"""The CI workflows: the CPU job does exactly what .ci/run does; the GPU job is guarded."""

from pathlib import Path

import yaml

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


def test_gpu_job_is_self_hosted_guarded_and_asserts_cuda():
    workflow = _load("gpu.yml")
    job = workflow["jobs"]["cuda"]
    assert job["runs-on"] == ["self-hosted", "linux", "x64", "gpu"]
    assert "head.repo.full_name == github.repository" in job["if"], "fork pull requests must never run on it"
    assert "schedule" in workflow["on"] and "pull_request" in workflow["on"]
    assert job["env"]["COURSE_DEVICE"] == "cuda"
    script = (ROOT / [s for s in job["steps"] if "run" in s][0]["run"].split()[-1]).read_text()
    assert "torch.cuda.is_available()" in script and "sys.exit(" in script
    assert "--nbval" in script and "test_mutations.py" in script and "bench" in script
