"""Which device a lesson and its checks use: CUDA, then Apple's MPS, then the CPU for the lesson;
the CPU, in float64, for the checks. No GPU or MPS exists here: their availability is faked, and
PyTorch's 'meta' device stands in for a lesson's device that is not the CPU."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from autograder.checks import device

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def machine(monkeypatch):
    """Set what this machine seems to have: machine(cuda=..., mps=...)."""

    def have(*, cuda: bool, mps: bool) -> None:
        monkeypatch.setattr(torch.cuda, "is_available", lambda: cuda)
        monkeypatch.setattr(torch.backends.mps, "is_available", lambda: mps)

    return have


@pytest.mark.parametrize(
    ("cuda", "mps", "lesson"),
    [
        (True, True, "cuda"),  # CUDA first, even on a machine that also has MPS
        (True, False, "cuda"),
        (False, True, "mps"),
        (False, False, "cpu"),
    ],
)
def test_the_lesson_takes_cuda_then_mps_then_the_cpu(machine, cuda, mps, lesson):
    machine(cuda=cuda, mps=mps)
    assert device.lesson_device(None) == torch.device(lesson)


@pytest.mark.parametrize("wanted", ["cpu", "cuda", "cuda:1", "mps"])
def test_course_device_overrides_whatever_the_machine_has(machine, wanted):
    machine(cuda=True, mps=True)
    assert device.lesson_device(wanted) == torch.device(wanted)
    machine(cuda=False, mps=False)
    assert device.lesson_device(wanted) == torch.device(wanted)


def test_a_course_device_that_names_no_device_says_what_was_expected():
    with pytest.raises(ValueError, match=r"COURSE_DEVICE='gpu' names no device: expected cpu, cuda"):
        device.lesson_device("gpu")


def _spy(*arguments: str) -> dict:
    """tests/device_spy.py's findings, run where the lesson's device is 'meta' (no check can compute
    there, and every machine has it): the device types of every tensor the checks handed to the
    reference of every Python exercise, and the test cells that failed."""
    run = subprocess.run(
        [sys.executable, "-m", "tests.device_spy", *arguments],
        env={**os.environ, "COURSE_DEVICE": "meta"},
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        check=True,
    )
    return json.loads(run.stdout.splitlines()[-1])


def test_the_spy_sees_a_check_that_computes_on_the_lesson_s_device():
    """Without the defence (the checks' device made the lesson's, as it was when the H200's CUDA
    context died inside a check), the learner's code is handed the lesson's device's tensors."""
    found = _spy("--checks-on-the-lesson-device", "Embedding")
    assert found["devices"].get("meta", 0) > 0, found


def test_every_tensor_a_check_hands_to_learner_code_is_on_the_cpu_whatever_the_lesson_s_device():
    """What keeps a CUDA device-side assert out of the learner's kernel: every visible and hidden
    test cell of lessons 01-11 hands the learner's code CPU tensors only (its arguments, and the
    parameters and buffers of its modules), even where the lesson's own device is another, and
    the reference still passes every cell there."""
    found = _spy()
    assert found["failures"] == []
    assert set(found["devices"]) == {"cpu"} and found["devices"]["cpu"] > 1000, found


def test_the_checks_compute_on_the_cpu_in_float64_on_every_machine():
    assert (device.DEVICE, device.DTYPE) == (torch.device("cpu"), torch.float64)


def test_the_device_line_says_where_the_experiments_and_where_the_checks_run():
    cpu, cuda, mps = torch.device("cpu"), torch.device("cuda"), torch.device("mps")
    assert device.describe_devices(cpu, here=cpu) == (
        "device: cpu for the lesson's experiments; "
        "the checks run on cpu, in float64 (the same verdicts on every machine)"
    )
    on_a_gpu = device.describe_devices(cuda, here=cuda)  # lesson 10 trains on the GPU
    assert on_a_gpu.startswith("device: cuda for the lesson's experiments; the checks run on cpu, in float64")
    on_a_mac = device.describe_devices(mps, here=mps)
    assert on_a_mac.startswith("device: mps for the lesson's experiments; the checks run on cpu, in float64")


def test_a_lesson_whose_experiments_stay_on_the_cpu_says_so_on_a_gpu_machine(machine):
    """What the H200 showed: lesson 11 printed `device: cuda` and timed the CPU. By default the line
    names the CPU for the experiments, and the accelerator it leaves unused."""
    machine(cuda=True, mps=False)
    line = device.describe_devices(here=device.lesson_device(None))
    assert line.startswith(
        "device: cpu for the lesson's experiments (cuda is here too; this lesson does not use it);"
    )
    assert "the checks run on cpu, in float64" in line


def test_the_line_is_what_nbval_hides_whole():
    """tests/nbval_sanitize.cfg replaces the whole line, so the committed outputs (written on a CPU)
    hold on a GPU machine, whatever the line says there."""
    import configparser
    import re

    sanitize = configparser.ConfigParser()
    sanitize.read(Path(__file__).parent / "nbval_sanitize.cfg")
    pattern, replacement = sanitize["device"]["regex"], sanitize["device"]["replace"]
    cpu, cuda = torch.device("cpu"), torch.device("cuda")
    for line in (device.describe_devices(cpu, here=cpu), device.describe_devices(cpu, here=cuda)):
        assert re.sub(pattern, replacement, f"{line}\nnext line\n") == "device: <DEVICE>\nnext line\n"


def test_the_module_s_lesson_device_is_the_choice_for_this_machine_and_its_course_device():
    assert device.LESSON_DEVICE == device.lesson_device(os.environ.get("COURSE_DEVICE"))


def test_a_cuda_build_without_a_cuda_runtime_leaves_no_notice_in_a_first_cell(caplog):
    """torch 2.11's CUDA build on this CPU machine logged "No CUDA runtime is found, using CUDA_HOME=..."
    when lesson 01's first cell imported autograder.timing (torch.utils.benchmark imports
    torch.utils.cpp_extension), and nbval failed every lesson's first cell on the stray stderr. The
    course drops that one record; without its filter the record is logged."""
    import logging

    import autograder  # noqa: F401 - the package installs the filter when imported

    logger = logging.getLogger("torch.utils.cpp_extension")
    notice = "No CUDA runtime is found, using CUDA_HOME='/usr/local'"
    [course_filter] = [f for f in logger.filters if type(f).__name__ == "_CudaHomeNotice"]
    with caplog.at_level(logging.WARNING, logger=logger.name):
        logger.warning(notice)
        logger.warning("another warning of that module")
    assert [r.getMessage() for r in caplog.records] == ["another warning of that module"]
    caplog.clear()
    logger.removeFilter(course_filter)
    try:
        with caplog.at_level(logging.WARNING, logger=logger.name):
            logger.warning(notice)
    finally:
        logger.addFilter(course_filter)
    assert [r.getMessage() for r in caplog.records] == [notice]


def _mask_on_the_cpu(size, device=None):
    """causal_mask as a learner writes it who never passes ``device`` on: right on the CPU."""
    return torch.ones(size, size, dtype=torch.bool).tril()


def test_a_causal_mask_that_ignores_its_device_is_told_so_though_the_checks_run_on_the_cpu():
    """Every value of this mask is right, and the checks compute on the CPU: the first visible
    check that fails says that the device argument is not used, as asking for a mask on 'meta' shows.
    The reference and a mask built by comparison (whose meta call works) pass."""
    from autograder.checks import CheckFailure
    from tests.helpers import CHECKS

    said = []
    for check in CHECKS["causal_mask"]:
        try:
            check(_mask_on_the_cpu)
        except CheckFailure as failure:
            said.append(str(failure))
    assert said and "the device argument is not used" in said[0], said

    def compared(size, device=None):
        index = torch.arange(size, device=device)
        return index[None, :] <= index[:, None]

    import solutions

    for honest in (solutions.causal_mask, compared):
        for check in CHECKS["causal_mask"]:
            check(honest)
