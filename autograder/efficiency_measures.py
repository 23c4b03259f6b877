"""Lesson 11's measuring instruments: exponent fits, decoding and attention timings, the bytes
autograd keeps, page faults, and the largest tensor a function creates.

The lesson's experiment cells call these, so that a cell shows what is measured and printed
rather than how the clock, the fault counter or the hooks are read.
"""

import math
import time
from collections.abc import Callable

import matplotlib.pyplot as plt
import torch
import torch.nn.functional as F

from autograder.checks.efficiency import largest_tensor
from autograder.timing import median_seconds
from solutions.attention import scaled_dot_product_attention

try:
    import resource  # page-fault counts: Linux and macOS
except ImportError:  # Windows
    resource = None

Attention = Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]


def fitted_exponent(sizes: list[int], measured: list[float]) -> float:
    """The slope p of log(measured) = p log(size) + c, by least squares."""
    x = torch.tensor(sizes, dtype=torch.float64).log()
    y = torch.tensor(measured, dtype=torch.float64).log()
    x = x - x.mean()
    return float((x * (y - y.mean())).sum() / (x * x).sum())


def decoding_seconds(
    uncached: Callable[..., torch.Tensor],
    cached: Callable[..., torch.Tensor],
    model: torch.nn.Module,
    src: torch.Tensor,
    lengths: list[int],
) -> tuple[list[float], list[float]]:
    """The median seconds of one whole decoding of ``src`` (no mask, start symbol 1, no end symbol)
    by ``uncached`` and by ``cached`` for each output length, printing a line per length."""
    without_cache, with_cache = [], []
    for length in lengths:
        slow = median_seconds(uncached, model, src, None, length, 1, min_run_time=0.2)
        fast = median_seconds(cached, model, src, None, length, 1, min_run_time=0.2)
        without_cache.append(slow)
        with_cache.append(fast)
        print(
            f"L={length:4d}: without cache {slow * 1e3:8.1f} ms, with cache {fast * 1e3:7.1f} ms, "
            f"{slow / fast:5.1f}x faster"
        )
    return without_cache, with_cache


def plot_decoding_seconds(lengths: list[int], without_cache: list[float], with_cache: list[float]) -> None:
    """Both decoders' times against the output length, in log-log axes, with their fitted exponents."""
    p_slow, p_fast = fitted_exponent(lengths, without_cache), fitted_exponent(lengths, with_cache)
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.loglog(lengths, without_cache, "o-", label=f"without cache (L^{p_slow:.1f})")
    ax.loglog(lengths, with_cache, "o-", label=f"with cache (L^{p_fast:.1f})")
    ax.set_xlabel("output length L (tokens)")
    ax.set_ylabel("seconds per decoding (B = 4)")
    ax.set_title("Greedy decoding on the CPU, D = 64, two layers")
    ax.legend()


def course_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """Lesson 03's attention, its output only."""
    return scaled_dot_product_attention(q, k, v)[0]


def saved_bytes(attention_fn: Attention, n: int, d_model: int = 128, n_heads: int = 4) -> int:
    """The bytes of the tensors autograd keeps for the backward pass of one attention call over
    ``n`` positions (each tensor's storage counted once)."""
    q, k, v = (torch.randn(1, n_heads, n, d_model // n_heads, requires_grad=True) for _ in range(3))
    storages = {}

    def keep(tensor: torch.Tensor) -> torch.Tensor:
        storages[tensor.untyped_storage().data_ptr()] = tensor.untyped_storage().nbytes()
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(keep, lambda tensor: tensor):
        attention_fn(q, k, v)
    return sum(storages.values())


def attention_seconds(sizes: list[int]) -> tuple[list[float], list[float]]:
    """The median seconds of lesson 03's attention and of ``F.scaled_dot_product_attention`` for
    ``n`` = each of ``sizes`` (``[1, 4, n, 32]``, D = 128, no gradients), printing a line per size."""
    ours_seconds, fused_seconds = [], []
    for n in sizes:
        q, k, v = (torch.randn(1, 4, n, 32) for _ in range(3))  # [B, h, n, d_k], D = 128
        with torch.no_grad():
            ours_seconds.append(median_seconds(scaled_dot_product_attention, q, k, v, min_run_time=0.3))
            fused_seconds.append(median_seconds(F.scaled_dot_product_attention, q, k, v, min_run_time=0.3))
        print(
            f"n={n:5d}: lesson 03 {ours_seconds[-1] * 1e3:8.2f} ms, "
            f"F.scaled_dot_product_attention {fused_seconds[-1] * 1e3:8.2f} ms, "
            f"{ours_seconds[-1] / fused_seconds[-1]:5.2f}x"
        )
    return ours_seconds, fused_seconds


def faults_and_seconds(fn: Callable[..., object], *args: object, calls: int = 3) -> tuple[float, float]:
    """Page faults and seconds per call of fn(*args), after one warm-up call (NaN faults where the
    system cannot count them)."""
    fn(*args)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt if resource else 0
    start = time.perf_counter()
    for _ in range(calls):
        fn(*args)
    seconds = (time.perf_counter() - start) / calls
    after = resource.getrusage(resource.RUSAGE_SELF).ru_minflt if resource else math.nan
    return (after - before) / calls, seconds


def preallocated(buffers: tuple[torch.Tensor, torch.Tensor]) -> Attention:
    """Lesson 03's arithmetic, written into buffers made once (``scores`` ``[B, h, n, n]`` and
    ``out`` ``[B, h, n, d_k]``): no fresh ``[h, n, n]`` tensor per call."""
    scores, out = buffers

    def attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        torch.matmul(q, k.transpose(-2, -1), out=scores)  # [B, h, n, n]
        scores.mul_(1 / math.sqrt(q.size(-1)))
        scores.sub_(scores.amax(dim=-1, keepdim=True)).exp_()  # the softmax, in place
        scores.div_(scores.sum(dim=-1, keepdim=True))
        return torch.matmul(scores, v, out=out)  # [B, h, n, d_k]

    return attend


def largest_count(attention_fn: Callable[..., object], *args: object) -> int:
    """How many numbers the largest tensor created by attention_fn(*args) holds."""
    return math.prod(largest_tensor(attention_fn, *args))
