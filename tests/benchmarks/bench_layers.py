"""Benchmark: the reference MultiHeadAttention and EncoderLayer beside PyTorch's own.

Run with `make bench` or `.venv/bin/python tests/benchmarks/bench_layers.py [--device cuda]`
(the CPU by default; tests/gpu_checks.sh runs it on CUDA).
A script, not a test (pytest collects only test_*.py): it prints, and exits 0
whether or not a ratio meets the goal.

Every module is in eval mode, float32, under torch.inference_mode(), with the
weights of the torch module copied into ours (the outputs are checked equal
first). Candidates are timed in turns, round after round, so that a change in
machine load hits all of them alike; each figure is the median over rounds.
"""

import argparse
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root, for the course packages

from autograder.checks.oracles import (  # noqa: E402
    encoder_layer_state,
    fastpath_disabled,
    load,
    mha_state,
    randomize_,
)
from solutions import EncoderLayer, MultiHeadAttention  # noqa: E402

B, T, D, H, D_FF = 8, 256, 512, 8, 2048
GOAL = 1.3  # ours / torch default, at most
WARMUP, ROUNDS = 3, 11
DEVICE = torch.device("cpu")  # set by --device


def _finish() -> None:
    """Wait for queued GPU work, so that a time covers the work and not just its launch."""
    if DEVICE.type == "cuda":
        torch.cuda.synchronize()


def measure(candidates: dict[str, Callable[[], object]]) -> dict[str, float]:
    """Median seconds per call of each candidate, timed in turns."""
    for fn in candidates.values():
        for _ in range(WARMUP):
            fn()
        _finish()
    times: dict[str, list[float]] = {name: [] for name in candidates}
    for _ in range(ROUNDS):
        for name, fn in candidates.items():
            start = time.perf_counter()
            fn()
            _finish()
            times[name].append(time.perf_counter() - start)
    return {name: statistics.median(values) for name, values in times.items()}


def report(title: str, difference: float, medians: dict[str, float], ours: str, baseline: str) -> None:
    print(f"\n{title}")
    print(f"  outputs agree: max |ours - torch| = {difference:.2e}")
    for name, seconds in medians.items():
        print(f"  {name:<44} {seconds * 1e3:9.2f} ms")
    ratio = medians[ours] / medians[baseline]
    verdict = "PASS" if ratio <= GOAL else "over goal"
    print(f"  ratio ours / {baseline}: {ratio:.2f}x  (goal <= {GOAL}x)  {verdict}")


def bench_attention(x: torch.Tensor) -> None:
    theirs = nn.MultiheadAttention(D, H, dropout=0.0, batch_first=True)
    randomize_(theirs, seed=1)
    ours = load(MultiHeadAttention(D, H), mha_state(theirs)).to(DEVICE).eval()
    theirs.to(DEVICE).eval()
    with torch.inference_mode():
        difference = (ours(x, x, x) - theirs(x, x, x)[0]).abs().max().item()
        medians = measure(
            {
                "ours (keeps weights in .attn)": lambda: ours(x, x, x),
                "torch need_weights=True (default)": lambda: theirs(x, x, x),
                "torch need_weights=False": lambda: theirs(x, x, x, need_weights=False),
            }
        )
    report(
        f"(a) MultiHeadAttention forward (self-attention), B={B} T={T} D={D} h={H}",
        difference,
        medians,
        "ours (keeps weights in .attn)",
        "torch need_weights=True (default)",
    )


def bench_encoder_layer(x: torch.Tensor) -> None:
    theirs = nn.TransformerEncoderLayer(D, H, D_FF, dropout=0.0, batch_first=True)
    randomize_(theirs, seed=2)
    ours = load(EncoderLayer(D, H, D_FF), encoder_layer_state(theirs)).to(DEVICE).eval()
    theirs.to(DEVICE).eval()

    def torch_without_fastpath():
        with fastpath_disabled():
            return theirs(x)

    with torch.inference_mode():
        difference = (ours(x) - theirs(x)).abs().max().item()
        medians = measure(
            {
                "ours": lambda: ours(x),
                "torch (default: fused fast path)": lambda: theirs(x),
                "torch (fast path disabled)": torch_without_fastpath,
            }
        )
    report(
        f"(b) EncoderLayer forward (post-LN), B={B} T={T} D={D} h={H} d_ff={D_FF}",
        difference,
        medians,
        "ours",
        "torch (default: fused fast path)",
    )


def main() -> int:
    global DEVICE
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--device", default="cpu", help="cpu (default) or cuda")
    DEVICE = torch.device(parser.parse_args().device)
    torch.manual_seed(0)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads (torch.get_num_threads())")
    print(f"python {platform.python_version()}, {platform.machine()}, os.cpu_count()={os.cpu_count()}")
    print(f"float32, eval mode, torch.inference_mode(); {WARMUP} warm-up calls, median of {ROUNDS} rounds")
    if DEVICE.type == "cuda":
        print(f"device: {torch.cuda.get_device_name(DEVICE)}")
    x = torch.randn(B, T, D).to(DEVICE)  # [B, T, D]
    started = time.perf_counter()
    bench_attention(x)
    bench_encoder_layer(x)
    print(f"\ntotal {time.perf_counter() - started:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
