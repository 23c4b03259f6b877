"""Benchmark: greedy decoding with a key/value cache (lesson 11) against full recomputation (lesson 09).

Run with `.venv/bin/python tests/benchmarks/bench_kv_cache.py [--rounds 3] [--device cpu]`.
A script, not a test (pytest collects only test_*.py): it prints, and exits 0 whether or
not the ratio meets the goal.

The model is the reference Transformer of lesson 09 with random weights, in eval mode,
float32: D = 64, h = 4, d_ff = 256, two layers, a batch of B = 4 sources of S = 16 tokens
(the size lesson 11's notebook times), decoded without an end symbol so that every row runs
to L tokens. Both decoders are first checked to give the same tokens. At each length the two
are timed in turns, round after round, so that a change in machine load hits both alike;
each figure is the median over rounds. The first line printed is

    kv cache: <x>x at 512 tokens

(the median time without the cache over the median time with it), then the times at every
length and the exponents p of time ~ L^p, fitted by least squares in log-log space.
"""

import argparse
import math
import os
import platform
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root, for the course packages

from solutions.efficiency import cached_greedy_decode  # noqa: E402
from solutions.output_layer import Transformer, greedy_decode  # noqa: E402

D, H, D_FF, N_LAYERS, B, S, VOCAB = 64, 4, 256, 2, 4, 16, 10
LENGTHS = (64, 128, 256, 512)
GOAL = 5.0  # at least this many times faster at 512 tokens


def fitted_exponent(sizes, seconds) -> float:
    """The slope p of log(seconds) = p log(size) + c, by least squares."""
    x = [math.log(s) for s in sizes]
    y = [math.log(t) for t in seconds]
    mx, my = statistics.fmean(x), statistics.fmean(y)
    return sum((a - mx) * (b - my) for a, b in zip(x, y, strict=True)) / sum((a - mx) ** 2 for a in x)


def _timed(fn, device) -> float:
    start = time.perf_counter()
    fn()
    if device.type == "cuda":
        torch.cuda.synchronize()
    return time.perf_counter() - start


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=3, help="timed runs per decoder and length (median)")
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args(argv)
    device = torch.device(args.device)
    torch.manual_seed(0)
    model = Transformer(VOCAB, VOCAB, D, H, D_FF, N_LAYERS, dropout=0.0, max_len=max(LENGTHS) + 1)
    model = model.to(device).eval()
    src = torch.randint(3, VOCAB, (B, S), device=device)
    if not torch.equal(greedy_decode(model, src, None, 64, 1), cached_greedy_decode(model, src, None, 64, 1)):
        print("the two decoders disagree: fix cached_greedy_decode first")
        return 1
    medians = {"without": [], "with": []}
    for length in LENGTHS:
        times = {"without": [], "with": []}
        cached_greedy_decode(model, src, None, length, 1)  # warm-up
        for _ in range(args.rounds):
            times["without"].append(_timed(lambda: greedy_decode(model, src, None, length, 1), device))  # noqa: B023
            times["with"].append(_timed(lambda: cached_greedy_decode(model, src, None, length, 1), device))  # noqa: B023
        for name in medians:
            medians[name].append(statistics.median(times[name]))
    ratio = medians["without"][-1] / medians["with"][-1]
    print(f"kv cache: {ratio:.1f}x at {LENGTHS[-1]} tokens")
    print(
        f"model: reference Transformer, D={D}, h={H}, d_ff={D_FF}, {N_LAYERS} layers, B={B}, S={S}, "
        f"float32, {device.type} ({platform.processor() or platform.machine()}, "
        f"{torch.get_num_threads()} threads, OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', 'unset')}); "
        f"median of {args.rounds} runs"
    )
    for index, length in enumerate(LENGTHS):
        slow, fast = medians["without"][index], medians["with"][index]
        print(f"L={length:4d}: without cache {slow:8.3f} s, with cache {fast:7.3f} s, {slow / fast:5.1f}x")
    print(
        "fitted exponents (time ~ L^p): "
        f"without cache p = {fitted_exponent(LENGTHS, medians['without']):.2f}, "
        f"with cache p = {fitted_exponent(LENGTHS, medians['with']):.2f}"
    )
    print(f"goal: at least {GOAL:.0f}x at {LENGTHS[-1]} tokens: {'met' if ratio >= GOAL else 'NOT met'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
