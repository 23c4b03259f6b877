"""Seconds from asking for a grading kernel to having run ``import torch, matplotlib.pyplot``
in it: a cold sandboxed kernel (autograder/engine/kernels/sandbox.py) against a warm one forked by the
process's zygote (autograder/engine/kernels/zygote.py). The median of five of each; the zygote's own
start, paid once per grading process, is shown apart.

    .venv/bin/python tests/benchmarks/bench_kernel_start.py
"""

import asyncio
import statistics
import tempfile
import time
from pathlib import Path

from autograder.engine.kernels import zygote
from autograder.engine.kernels.sandbox import SandboxedKernelManager

RUNS = 5
IMPORTS = "import torch, matplotlib.pyplot"


async def ready_and_imported(manager_class: type, workspace: Path) -> float:
    """Seconds to start a kernel of ``manager_class``, wait until it answers, and run IMPORTS."""
    folder = workspace / "autograded" / "ada" / "01_embedding"
    folder.mkdir(parents=True, exist_ok=True)
    manager = manager_class(kernel_name="python3", hidden=[str(workspace)])
    start = time.perf_counter()
    await manager.start_kernel(cwd=str(folder))
    client = manager.client()
    client.start_channels()
    try:
        await client.wait_for_ready(timeout=120)
        reply = await client.execute_interactive(IMPORTS, timeout=120)
        assert reply["content"]["status"] == "ok", reply["content"]
        return time.perf_counter() - start
    finally:
        client.stop_channels()
        await manager.shutdown_kernel(now=True)


async def main() -> None:
    with tempfile.TemporaryDirectory() as workspace:
        cold = [await ready_and_imported(SandboxedKernelManager, Path(workspace)) for _ in range(RUNS)]
        first = await ready_and_imported(zygote.WarmKernelManager, Path(workspace))
        warm = [await ready_and_imported(zygote.WarmKernelManager, Path(workspace)) for _ in range(RUNS)]
        zygote.shutdown()
    print(f"cold (SandboxedKernelManager): median {statistics.median(cold):.2f} s of {RUNS}")
    print(f"warm (WarmKernelManager):      median {statistics.median(warm):.2f} s of {RUNS}")
    print(f"first warm kernel, with the zygote's start: {first:.2f} s")


if __name__ == "__main__":
    asyncio.run(main())
