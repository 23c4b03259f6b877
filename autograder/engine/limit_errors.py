"""The cells of a graded notebook that failed at one of the sandbox's per-process limits, as
lines for the instructor's report.

A process that reaches a limit is not ended: the operating system refuses what it asked for.
Past the memory cap (RLIMIT_DATA) an allocation fails, and the cell raises ``MemoryError``
(numpy's ``_ArrayMemoryError``, PyTorch's "DefaultCPUAllocator: can't allocate memory");
past the file-size cap (RLIMIT_FSIZE) a write fails with EFBIG ("File too large"). The cell
scores what any failed cell scores; the report says which cap it met, so that a correct
solution that needs more than the caps give is seen, and the caps raised if they are too low.

The errors are the kernel's outputs, hostile data: they are matched, never copied (each line
is in the course's own words) and a line is only ever about the notebook it was read from. A
submission that raises such an error itself gets a line about itself, and nothing else.
"""

from nbformat import NotebookNode

from autograder.engine.execute import describe
from autograder.engine.kernels.sandbox import Limits

MEMORY_ERRORS = frozenset({"MemoryError", "_ArrayMemoryError"})
TORCH_OUT_OF_MEMORY = "DefaultCPUAllocator: can't allocate memory"
FILE_TOO_LARGE = "[Errno 27] "  # EFBIG, as OSError words it


def _cap_met(output: NotebookNode, limits: Limits) -> str | None:
    """Which of the sandbox's caps an error output says its cell met, in words; None if none."""
    name, value = str(output.get("ename", "")), str(output.get("evalue", ""))
    if name in MEMORY_ERRORS or (name == "RuntimeError" and TORCH_OUT_OF_MEMORY in value):
        return f"ran out of memory at the sandbox's cap of {limits.memory_gib:g} GiB a process (--memory-gib)"
    if name in ("OSError", "IOError") and value.startswith(FILE_TOO_LARGE):
        return f"wrote a file up to the sandbox's cap of {limits.file_mib:,} MiB a file (--file-mib)"
    return None


def limit_lines(nb: NotebookNode, limits: Limits) -> list[str]:
    """A line for each cell of ``nb`` whose error says it met one of ``limits``' caps."""
    lines: list[str] = []
    for index, cell in enumerate(nb.cells):
        for output in cell.get("outputs", []):
            met = _cap_met(output, limits) if output.get("output_type") == "error" else None
            line = f"{describe(cell, index)} {met}: it failed there" if met else None
            if line and line not in lines:
                lines.append(line)
    return lines
