"""The course's execute step: nbgrader's Execute, with the judge beside the kernel.

nbgrader runs a submitted notebook's cells in a kernel (its Execute step, nbconvert's
ExecutePreprocessor). The course's step keeps that loop and adds, through nbclient's own
hooks, what grading strangers' code needs:

- right after each test cell, the independent judge (autograder/engine/judge.py) runs it again
  outside the kernel; a test cell that passed only inside the kernel is failed with the
  judge's reason (``setup_kernel`` opens the judge once the kernel is up and closes it before
  the kernel ends);
- the lesson's experiment cells (figures, timings) are skipped, as the source notebook marks
  them (``grading.experiments``); a learner's own cells always run;
- when the kernel dies or ignores an interrupt, ``GradingStopped`` says in which cell, in plain
  words (the kernel's memory cap when that is what ended it);
- what the kernel left in its folder and the sandbox did not keep is recorded in the
  notebook's metadata (``FILES_METADATA``) for the instructor's report;
- where its time went (``SECONDS``) goes back in nbgrader's resources, not into any file: the
  grader's own record of its speed (tests/benchmarks/bench_grading.py).
"""

import contextlib
import time
from collections.abc import Iterator

from nbclient.exceptions import CellTimeoutError, DeadKernelError
from nbformat import NotebookNode
from nbformat.v4 import new_output
from nbgrader.preprocessors import Execute
from traitlets import Bool

from autograder.engine.submission_files import FILES_METADATA
from autograder.grading import experiments, is_test_cell, lesson_of


class GradingStopped(RuntimeError):
    """Grading of a notebook stopped at one cell; the message says which, and why, in plain words."""


def describe(cell: NotebookNode, index: int) -> str:
    """'the solution cell of Embedding', 'the test cell test_x', 'cell 7 (added by the learner)'."""
    meta = cell.metadata.get("nbgrader", {})
    if meta.get("solution"):
        return f"the solution cell of {meta['grade_id']}"
    if meta.get("grade"):
        return f"the test cell {meta['grade_id']}"
    return f"cell {meta['grade_id']}" if meta else f"cell {index + 1} (added by the learner)"


SKIPPED_NOTE = "(Not run while grading: this cell neither defines nor tests anything graded.)\n"
# nbgrader's resources key for the step's seconds: "zygote start" (a warm kernel's zygote, when
# this kernel needed a new one), "kernel start" (the rest of its start, until it answered),
# "cells" (the cells and the judge, while the kernel was up) and "kernel stop"
SECONDS = "course_seconds"


class CourseExecute(Execute):
    """nbgrader's Execute step with the judge after each test cell, the lesson's experiments
    skipped, and a stopped kernel reported by its cell (the module's docstring)."""

    skip_experiments = Bool(True, help="Skip the lesson's experiment cells while grading.").tag(config=True)

    def _skipped(self, resources: dict) -> frozenset[str]:
        """The grade ids of the cells not to run: the lesson's experiments, unless asked to run them."""
        lesson = lesson_of(resources)
        return experiments(lesson) if self.skip_experiments and lesson else frozenset()

    def preprocess(self, nb: NotebookNode, resources: dict | None = None, km=None):
        from autograder.engine.judge import JUDGE_METADATA  # imports torch: only when grading

        nb.metadata.pop(JUDGE_METADATA, None)  # a submission's own record of a judge is never read
        nb.metadata.pop(FILES_METADATA, None)  # nor its own lines of what its kernel left
        self._resources = resources or {}
        self._skipped_ids = self._skipped(self._resources)
        self._exited_in: str | None = None
        self._left_behind: list[str] = []
        self._seconds: dict[str, float] = {}
        began = time.perf_counter()
        nb, resources = super().preprocess(nb, resources, km)
        if self._left_behind:
            nb.metadata[FILES_METADATA] = self._left_behind
        spent = self._seconds
        spent["cells"] = time.perf_counter() - began - sum(spent.values())
        resources[SECONDS] = spent
        return nb, resources

    @contextlib.contextmanager
    def setup_kernel(self, **kwargs) -> Iterator[None]:
        """nbclient's kernel for the notebook, with the judge connected while it is up; once the
        kernel has ended (and its folder is cleaned), what it left that was not kept."""
        from autograder.engine import judge  # imports torch and the checks: only when grading

        began = time.perf_counter()
        with super().setup_kernel(**kwargs):
            manager = self.km  # nbclient forgets it when the kernel ends
            zygote = getattr(manager, "zygote_seconds", 0.0)
            self._seconds |= {"zygote start": zygote, "kernel start": time.perf_counter() - began - zygote}
            self._judge = judge.for_notebook(self, self._resources)
            try:
                yield
            finally:
                if self._judge is not None:
                    self._judge.close(self.nb)
                stopping = time.perf_counter()
        self._seconds["kernel stop"] = time.perf_counter() - stopping
        self._left_behind = list(getattr(manager, "left_behind", []))

    def on_cell_executed(self, **kwargs) -> None:
        super().on_cell_executed(**kwargs)
        # exit() in a cell ends the kernel just after that cell: the next cell finds it dead
        if any(p.get("source") == "ask_exit" for p in kwargs["execute_reply"]["content"].get("payload", [])):
            self._exited_in = describe(kwargs["cell"], kwargs["cell_index"])

    def preprocess_cell(self, cell: NotebookNode, resources: dict, index: int):
        if cell.metadata.get("nbgrader", {}).get("grade_id") in self._skipped_ids:
            cell.outputs = [new_output("stream", name="stdout", text=SKIPPED_NOTE)]
            return cell, resources
        try:
            result = super().preprocess_cell(cell, resources, index)
        except DeadKernelError as error:
            where = (
                f"after exit() in {self._exited_in}"
                if self._exited_in
                else f"while running {describe(cell, index)}"
            )
            if getattr(self.km, "hit_memory_cap", lambda: False)():
                where += f" (it reached the sandbox's memory cap of {self.km.limits().memory_gib:g} GiB)"
            if getattr(self.km, "hit_write_cap", lambda: False)():
                where += f" (its folder passed the sandbox's cap of {self.km.limits().disk_mib:,} MiB)"
            raise GradingStopped(f"the kernel exited {where}") from error
        except CellTimeoutError as error:  # interrupted at the time limit, and it went on running
            raise GradingStopped(
                f"{describe(cell, index)} ran past the {self.timeout} s limit and did not stop when "
                "interrupted (it ignores interrupts)"
            ) from error
        if self._exited_in:  # the kernel stops a moment after exit(): stop here, not in a race
            raise GradingStopped(f"the kernel exited after exit() in {self._exited_in}")
        if self._judge is not None and is_test_cell(cell):
            self._judge.cell(cell)
        return result
