"""Which device a lesson and its checks use: CUDA, then Apple's MPS, then the CPU for the lesson;
the checks wherever float64 exists. No GPU or MPS exists here: their availability is faked."""

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


def test_the_first_cell_names_one_device_when_both_agree_and_both_when_they_differ():
    cpu, mps = torch.device("cpu"), torch.device("mps")
    assert device.describe_devices(cpu, cpu) == "device: cpu"  # what nbval sees in the built notebooks
    line = device.describe_devices(mps, cpu)
    assert line.startswith("device: mps for the lesson's own work; the checks run on cpu")
    assert "float64" in line


def test_the_module_s_devices_are_the_choice_for_this_machine_and_its_course_device():
    import os

    chosen = device.lesson_device(os.environ.get("COURSE_DEVICE"))
    assert (device.LESSON_DEVICE, device.DEVICE) == (chosen, device.checks_device(chosen))
