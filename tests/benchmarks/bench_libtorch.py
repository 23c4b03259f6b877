"""Benchmark: lesson 12's C++ modules, how long they take to compile and how fast they run.

Run with `.venv/bin/python tests/benchmarks/bench_libtorch.py`. A script, not a test: it prints.

1. Compile: the three reference modules in one build, into a fresh cache folder (cold), then the
   same call in a new process (warm: ninja finds nothing to do, the library is imported), then each
   module alone as the lesson's exercise cells compile them.
2. Speed: each C++ module against its Python twin (lessons 01, 07, 05) with the same weights, float32,
   inference mode, one thread, on a small input (where the Python overhead per operation shows)
   and a large one (where the same ATen kernels do the work), timed in turns, medians of rounds.
"""

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # the repository root, for the course packages

from autograder import libtorch  # noqa: E402
from autograder.timing import median_seconds  # noqa: E402
from solutions import libtorch as reference  # noqa: E402
from solutions.embedding import Embedding  # noqa: E402
from solutions.feed_forward import PositionwiseFeedForward  # noqa: E402
from solutions.multi_head import MultiHeadAttention  # noqa: E402

ROUNDS = 7
BUILD_CELLS = "from solutions import libtorch; libtorch.build()"  # three builds, as the notebook's cells
BUILD_ONE = "from solutions import libtorch; libtorch.{name}.compile()"
BUILD_TOGETHER = (
    "from autograder.libtorch import Part, compile_many; from solutions import libtorch; "
    "compile_many([Part(s.name, s.name, s.source) for s in libtorch.SOURCES])"
)


def seconds_in_new_process(code: str, cache: str) -> float:
    """Wall time of ``code`` in a fresh Python (torch imported before the clock starts)."""
    timed = f"import time, torch; start = time.perf_counter(); {code}; print(time.perf_counter() - start)"
    env = os.environ | {libtorch.CACHE_VARIABLE: cache}
    done = subprocess.run(
        [sys.executable, "-c", timed], env=env, cwd=ROOT, capture_output=True, text=True, check=True
    )
    return float(done.stdout.strip().splitlines()[-1])


def compile_times() -> None:
    with tempfile.TemporaryDirectory() as cache:
        for source in reference.SOURCES:
            name = f"Cpp{source.name}"
            alone = seconds_in_new_process(BUILD_ONE.format(name=name), cache)
            print(f"compile, {name} alone (an exercise cell): cold {alone:.1f} s")
        warm = seconds_in_new_process(BUILD_CELLS, cache)
        print(f"the three exercise cells again, in a new process: warm {warm:.2f} s")
        together = seconds_in_new_process(BUILD_TOGETHER, cache)
        print(f"compile, the three modules in one build: cold {together:.1f} s")


def pairs(size: str):
    """(name, python module, C++ module with its weights, inputs) for a 'small' or 'large' input."""
    cpp = reference.build()
    b, t, d = (1, 8, 64) if size == "small" else (8, 256, 512)
    generator = torch.Generator().manual_seed(0)
    tokens = torch.randint(0, 1000, (b, t), generator=generator)
    x = torch.randn(b, t, d, generator=generator)
    for name, python, cpp_class, args, inputs in (
        ("Embedding", Embedding(1000, d), cpp["Embedding"], (1000, d), (tokens,)),
        (
            "PositionwiseFeedForward",
            PositionwiseFeedForward(d, 4 * d),
            cpp["PositionwiseFeedForward"],
            (d, 4 * d),
            (x,),
        ),
        ("MultiHeadAttention", MultiHeadAttention(d, 8), cpp["MultiHeadAttention"], (d, 8), (x, x, x)),
    ):
        twin = cpp_class(*args)
        twin.load_state_dict(python.state_dict())
        yield name, python.eval(), twin.eval(), inputs, (b, t, d)


def speed() -> None:
    torch.set_num_threads(1)
    with torch.inference_mode():
        for size in ("small", "large"):
            for name, python, twin, inputs, shape in pairs(size):
                torch.testing.assert_close(twin(*inputs), python(*inputs))
                times = {"python": [], "c++": []}
                for _ in range(ROUNDS):
                    times["python"].append(median_seconds(python, *inputs, min_run_time=0.05))
                    times["c++"].append(median_seconds(twin, *inputs, min_run_time=0.05))
                py, cc = (statistics.median(times[k]) for k in ("python", "c++"))
                print(
                    f"{size:>5} [B, T, D] = {list(shape)} {name:<24} python {py * 1e6:9.1f} us  "
                    f"c++ {cc * 1e6:9.1f} us  python / c++ = {py / cc:.2f}"
                )


if __name__ == "__main__":
    start = time.perf_counter()
    compile_times()
    speed()
    print(f"benchmark done in {time.perf_counter() - start:.0f} s")
