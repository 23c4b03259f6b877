"""Where and how precisely the checks compute: one DEVICE for the whole course."""

import contextlib
import os
from collections.abc import Iterator

import torch


def _choose_device() -> torch.device:
    """cuda when available, unless COURSE_DEVICE names another ("cpu", "cuda")."""
    wanted = os.environ.get("COURSE_DEVICE")
    if wanted:
        return torch.device(wanted)
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


DEVICE = _choose_device()
DTYPE = torch.float64  # checks compare in float64, so tolerances can be tight on every device


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
