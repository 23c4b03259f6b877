"""Where and how precisely the course computes.

Two devices:

- ``LESSON_DEVICE``, where a lesson's own work may run (training, experiments, timings): CUDA,
  then Apple's MPS, then the CPU. A lesson whose experiments use it says so in its first cell
  (``describe_devices(LESSON_DEVICE)``); the others run theirs on the CPU;
- ``DEVICE``, where the checks run: always the CPU, in float64 (``DTYPE``). The checks call the
  learner's code on their own small tensors, so every machine gives the same verdicts; and a
  learner's out-of-range index inside a check raises an ``IndexError`` on the CPU instead of a
  CUDA device-side assert, which would leave the kernel's CUDA context unusable for every later
  check and cell until a restart (what an H200 showed: one gather with the pad id, then 42
  unrelated failures).

``COURSE_DEVICE`` ("cpu", "cuda", "cuda:1", "mps") overrides the lesson's choice; grading sets "cpu".
"""

import contextlib
import os
from collections.abc import Iterator

import torch

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


LESSON_DEVICE = lesson_device(os.environ.get("COURSE_DEVICE"))
DEVICE = CPU
DTYPE = torch.float64  # checks compare in float64, so tolerances can be tight on every device


def describe_devices(experiments: torch.device = CPU, here: torch.device = LESSON_DEVICE) -> str:
    """The line a lesson's first cell prints: where its own experiments (and timings) run, and that
    the checks run on the CPU. A lesson's experiments run on the CPU unless it moves them to
    ``LESSON_DEVICE`` and passes that here; when they leave this machine's accelerator (``here``)
    unused, the line says so, so that a CPU timing is never read as a GPU's."""
    unused = f" ({here} is here too; this lesson does not use it)" if here != experiments else ""
    return (
        f"device: {experiments} for the lesson's experiments{unused}; "
        f"the checks run on {DEVICE}, in float64 (the same verdicts on every machine)"
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
