"""Which device a lesson and its checks use: CUDA, then Apple's MPS, then the CPU for the lesson;
the checks wherever float64 exists. No GPU or MPS exists here: their availability is faked."""

from pathlib import Path

import pytest
import torch

from autograder.checks import device


@pytest.fixture
def machine(monkeypatch):
    """Set what this machine seems to have: machine(cuda=..., mps=...)."""

    def have(*, cuda: bool, mps: bool) -> None:
        monkeypatch.setattr(torch.cuda, "is_available", lambda: cuda)
        monkeypatch.setattr(torch.backends.mps, "is_available", lambda: mps)

    return have


@pytest.mark.parametrize(
    ("cuda", "mps", "lesson", "checks"),
    [
        (True, True, "cuda", "cuda"),  # CUDA first, even on a machine that also has MPS
        (True, False, "cuda", "cuda"),
        (False, True, "mps", "cpu"),  # MPS has no float64: the checks run on the CPU
        (False, False, "cpu", "cpu"),
    ],
)
def test_the_lesson_takes_cuda_then_mps_then_the_cpu_and_the_checks_need_float64(
    machine, cuda, mps, lesson, checks
):
    machine(cuda=cuda, mps=mps)
    chosen = device.lesson_device(None)
    assert chosen == torch.device(lesson)
    assert device.checks_device(chosen) == torch.device(checks)


@pytest.mark.parametrize("wanted", ["cpu", "cuda", "cuda:1", "mps"])
def test_course_device_overrides_whatever_the_machine_has(machine, wanted):
    machine(cuda=True, mps=True)
    assert device.lesson_device(wanted) == torch.device(wanted)
    machine(cuda=False, mps=False)
    assert device.lesson_device(wanted) == torch.device(wanted)


def test_grading_on_the_cpu_keeps_the_checks_there_on_a_machine_with_every_device(machine):
    machine(cuda=True, mps=True)
    assert device.checks_device(device.lesson_device("cpu")) == torch.device("cpu")


def test_course_device_set_to_mps_still_checks_on_the_cpu():
    assert device.checks_device(device.lesson_device("mps")) == torch.device("cpu")


def test_a_course_device_that_names_no_device_says_what_was_expected():
    with pytest.raises(ValueError, match=r"COURSE_DEVICE='gpu' names no device: expected cpu, cuda"):
        device.lesson_device("gpu")


def test_the_checks_device_holds_float64_where_the_lesson_device_may_not():
    """What the split is for: float64 on the checks' device, here the CPU."""
    x = torch.ones(2, dtype=device.DTYPE, device=device.checks_device(torch.device("mps")))
    assert x.dtype == torch.float64 and x.device.type == "cpu"


def test_the_device_line_says_where_the_experiments_and_where_the_checks_run():
    cpu, cuda, mps = torch.device("cpu"), torch.device("cuda"), torch.device("mps")
    assert device.describe_devices(cpu, cpu, here=cpu) == (
        "device: cpu for the lesson's experiments; "
        "the checks run on cpu, in float64 (the same verdicts on every machine)"
    )
    on_a_gpu = device.describe_devices(cuda, cuda, here=cuda)  # lesson 10 trains on the GPU
    assert on_a_gpu.startswith(
        "device: cuda for the lesson's experiments; the checks run on cuda, in float64"
    )
    on_a_mac = device.describe_devices(mps, cpu, here=mps)
    assert on_a_mac.startswith("device: mps for the lesson's experiments; the checks run on cpu, in float64")


def test_a_lesson_whose_experiments_stay_on_the_cpu_says_so_on_a_gpu_machine(machine):
    """What the H200 showed: lesson 11 printed `device: cuda` and timed the CPU. By default the line
    names the CPU for the experiments, and the accelerator it leaves unused."""
    machine(cuda=True, mps=False)
    here = device.lesson_device(None)
    line = device.describe_devices(checks=device.checks_device(here), here=here)
    assert line.startswith(
        "device: cpu for the lesson's experiments (cuda is here too; this lesson does not use it);"
    )
    assert "the checks run on cuda, in float64" in line


def test_the_line_is_what_nbval_hides_whole():
    """tests/nbval_sanitize.cfg replaces the whole line, so the committed outputs (written on a CPU)
    hold on a GPU machine, whatever the line says there."""
    import configparser
    import re

    sanitize = configparser.ConfigParser()
    sanitize.read(Path(__file__).parent / "nbval_sanitize.cfg")
    pattern, replacement = sanitize["device"]["regex"], sanitize["device"]["replace"]
    cpu, cuda = torch.device("cpu"), torch.device("cuda")
    for line in (device.describe_devices(cpu, cpu, here=cpu), device.describe_devices(cpu, cuda, here=cuda)):
        assert re.sub(pattern, replacement, f"{line}\nnext line\n") == "device: <DEVICE>\nnext line\n"


def test_the_module_s_devices_are_the_choice_for_this_machine_and_its_course_device():
    import os

    chosen = device.lesson_device(os.environ.get("COURSE_DEVICE"))
    assert (device.LESSON_DEVICE, device.DEVICE) == (chosen, device.checks_device(chosen))
