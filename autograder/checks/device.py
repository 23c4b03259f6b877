"""Where and how precisely the course computes.

Two devices, because Apple's MPS has no float64:

- ``LESSON_DEVICE``, where a lesson's own work may run (training, experiments, timings): CUDA,
  then MPS, then the CPU. A lesson whose experiments use it says so in its first cell
  (``describe_devices(LESSON_DEVICE)``); the others run theirs on the CPU;
- ``DEVICE``, where the checks run, in float64 (``DTYPE``): the lesson's device when it has
  float64 (CUDA or the CPU), the CPU instead of MPS. The checks call the learner's code on
  their own tensors, so every machine gives the same verdicts.

``COURSE_DEVICE`` ("cpu", "cuda", "cuda:1", "mps") overrides the choice; grading sets "cpu".
"""

import contextlib
import os
from collections.abc import Iterator

import torch

FLOAT64_LACKING = ("mps",)  # device types that cannot hold float64 tensors
CPU = torch.device("cpu")


def lesson_device(wanted: str | None) -> torch.device:
    """``wanted`` (COURSE_DEVICE's value) when given; otherwise CUDA, then Apple's MPS, then the CPU."""
    if wanted:
        try:
            return torch.device(wanted)
        except RuntimeError as error:
            raise ValueError(
                f"COURSE_DEVICE={wanted!r} names no device: expected cpu, cuda, cuda:<index> or mps"
            ) from error
    if torch.cuda.is_available():
        return torch.device("cuda")
    if torch.backends.mps.is_available():
        return torch.device("mps")
    return torch.device("cpu")


def checks_device(lesson: torch.device) -> torch.device:
    """Where the checks compute in float64: the lesson's device, or the CPU when it lacks float64."""
    return torch.device("cpu") if lesson.type in FLOAT64_LACKING else lesson


LESSON_DEVICE = lesson_device(os.environ.get("COURSE_DEVICE"))
DEVICE = checks_device(LESSON_DEVICE)
DTYPE = torch.float64  # checks compare in float64, so tolerances can be tight on every device


def describe_devices(
    experiments: torch.device = CPU, checks: torch.device = DEVICE, here: torch.device = LESSON_DEVICE
) -> str:
    """The line a lesson's first cell prints: where its own experiments (and timings) run, and where
    the checks run. A lesson's experiments run on the CPU unless it moves them to ``LESSON_DEVICE``
    and passes that here; when they leave this machine's accelerator (``here``) unused, the line
    says so, so that a CPU timing is never read as a GPU's."""
    unused = f" ({here} is here too; this lesson does not use it)" if here != experiments else ""
    return (
        f"device: {experiments} for the lesson's experiments{unused}; "
        f"the checks run on {checks}, in float64 (the same verdicts on every machine)"
    )


@contextlib.contextmanager
def exact_matmul() -> Iterator[None]:
    """Turn TF32 off while checking: on recent GPUs it changes float32 matmul results."""
    saved = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = saved


def tolerance(*tensors: torch.Tensor) -> dict[str, float]:
    """rtol/atol for comparing tensors, set by the least precise dtype among them."""
    if all(t.dtype == torch.float64 for t in tensors):
        return {"rtol": 1e-7, "atol": 1e-9}
    return {"rtol": 1e-4, "atol": 1e-5}


def random_tensor(*shape: int, seed: int, scale: float = 1.0) -> torch.Tensor:
    """Standard normal float64 values on DEVICE, the same on every device for a given seed."""
    generator = torch.Generator().manual_seed(seed)
    return (torch.randn(*shape, generator=generator, dtype=DTYPE) * scale).to(DEVICE)


def random_mask(batch: int, t_q: int, t_k: int, seed: int) -> torch.Tensor:
    """Bool[B, 1, T_q, T_k] on DEVICE, True = may attend: different for every query and batch item,
    neither symmetric nor all True; every query keeps its first key and loses its last."""
    generator = torch.Generator().manual_seed(seed)
    mask = torch.rand(batch, 1, t_q, t_k, generator=generator) < 0.6
    mask[..., 0] = True
    mask[..., -1] = False
    return mask.to(DEVICE)
