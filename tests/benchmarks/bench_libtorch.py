"""Benchmark: lesson 12's C++ modules, how long they take to compile and how fast they run.

Run with `.venv/bin/python tests/benchmarks/bench_libtorch.py`. A script, not a test: it prints.

1. Compile, each build in a new process, wall and CPU seconds (the compiler's, the trial's and the
   process's own import of torch included), with the load average (the machine may be shared:
   compare the figures of one run). Without a precompiled header: one module into an empty cache
   (``COURSE_CPP_CACHE`` set, as in a grading kernel whose grader made nothing: it compiles the
   binding object too, and reads torch's headers itself). On a fresh "machine" (``XDG_CACHE_HOME``
   a new folder, where torch puts a learner's builds): the first module (which precompiles torch's
   headers and compiles the binding object), then each of the other two, printed as
   ``cpp compile: <s> s per module after the first``; then the three cells again (warm: imported
   from the cache) and the three modules in one build.
2. Speed: each C++ module against its Python twin (lessons 01, 07, 05) with the same weights, float32,
   inference mode, one thread, on a small input (where the Python overhead per operation shows)
   and a large one (where the same ATen kernels do the work), timed in turns, medians of rounds.

The compiler is the course's (``cpp_pch.compiler``: clang++ where installed, else g++);
``COURSE_CXX=g++`` measures g++ where both are.
"""

import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # the repository root, for the course packages

from autograder import cpp_pch, libtorch  # noqa: E402
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


def seconds_in_new_process(code: str, variables: dict[str, str]) -> tuple[float, float]:
    """Wall time of ``code`` in a fresh Python (torch imported before the clock starts) with
    ``variables`` set (and the course's cache variable unset unless given), and the CPU seconds of
    that process and everything it started (the compiler)."""
    timed = f"import time, torch; start = time.perf_counter(); {code}; print(time.perf_counter() - start)"
    env = {name: value for name, value in os.environ.items() if name != libtorch.CACHE_VARIABLE} | variables
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run(
        [sys.executable, "-c", timed], env=env, cwd=ROOT, capture_output=True, text=True, check=True
    )
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    return float(done.stdout.strip().splitlines()[-1]), cpu


def load() -> str:
    return "load average " + ", ".join(f"{value:.1f}" for value in os.getloadavg())


def compile_times(machine: str) -> None:
    """The figures of section 1; ``machine``: the new way's fresh extensions folder, kept for section 2."""
    names = [f"Cpp{source.name}" for source in reference.SOURCES]
    print(f"compiler: {cpp_pch.compiler_identity()}")
    with tempfile.TemporaryDirectory() as cache:
        old = seconds_in_new_process(BUILD_ONE.format(name=names[0]), {libtorch.CACHE_VARIABLE: cache})
        print(
            f"no precompiled header nor binding object: {names[0]} {old[0]:.1f} s wall, {old[1]:.1f} s CPU "
            f"({load()})"
        )
    learner = {"XDG_CACHE_HOME": machine}
    first = seconds_in_new_process(BUILD_ONE.format(name=names[0]), learner)
    print(
        f"first build (torch's headers precompiled, the binding compiled): {first[0]:.1f} s wall, "
        f"{first[1]:.1f} s CPU ({load()})"
    )
    later = [seconds_in_new_process(BUILD_ONE.format(name=name), learner) for name in names[1:]]
    for name, (wall, cpu) in zip(names[1:], later, strict=True):
        print(f"later build, {name}: {wall:.1f} s wall, {cpu:.1f} s CPU ({load()})")
    wall, cpu = (statistics.mean(figures) for figures in zip(*later, strict=True))
    print(f"later builds against an empty cache: {old[0] / wall:.1f}x wall, {old[1] / cpu:.1f}x CPU")
    warm = seconds_in_new_process(BUILD_CELLS, learner)
    print(f"the three exercise cells again, in a new process: warm {warm[0]:.2f} s")
    together = seconds_in_new_process(BUILD_TOGETHER, learner)
    print(f"the three modules in one build: {together[0]:.1f} s wall, {together[1]:.1f} s CPU")
    print(
        f"cpp compile: {wall:.1f} s per module after the first ({cpu:.1f} s CPU; the first {first[0]:.1f} s; "
        f"{cpp_pch.compiler()})"
    )


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
    with tempfile.TemporaryDirectory() as machine:
        compile_times(machine)
        os.environ["XDG_CACHE_HOME"] = machine  # section 2 imports the builds made above
        os.environ.pop(libtorch.CACHE_VARIABLE, None)
        if "--compile-only" not in sys.argv:
            speed()
    print(f"benchmark done in {time.perf_counter() - start:.0f} s")
