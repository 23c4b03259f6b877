"""Grading many submissions at once: worker processes on this machine, or a Dask cluster.

Each submission is one task, ``grade_task(setup, lesson, student)``: a worker grades it with
``verdicts.grade`` and the picklable ``Setup`` of the instructor's pipeline, in its own
sandboxed kernel, exactly as the sequential loop would, records its verdict beside its score in
the gradebook, and sends back its ``Graded`` value. Tasks share nothing but the gradebook (SQLite
waits for a writer; PostgreSQL takes writers at once) and the workspace's folders, each task
writing only its own submission's.

A task whose worker dies is graded again by another: on this machine, by a fresh pool;
on Dask, by the scheduler, which reschedules the tasks of a lost worker by itself. One that
cannot be graded at all is recorded here as failed, so that no earlier verdict of it stays.
"""

import multiprocessing
import multiprocessing.util
import os
import sys
import threading
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool

from autograder.engine import verdicts
from autograder.engine.cpp_cache import CPP_LESSONS
from autograder.engine.submission import Graded, Problem, Setup
from autograder.engine.workspace import Key

# One submission at a time per process (a process has one zygote, autograder/engine/kernels/zygote.py), even
# on a Dask worker that runs several tasks at once in threads: start those with --nthreads 1.
_ONE_AT_A_TIME = threading.Lock()
LAST = -100  # a finalizer's priority below any of multiprocessing's or ours: it runs after them


def grade_task(setup: Setup, lesson: str, student: str) -> Graded:
    """Grade one submission in this process, as ``setup`` says, and record its verdict."""
    with _ONE_AT_A_TIME:
        return verdicts.grade(setup, lesson, student)


def start_worker(threads: int) -> None:
    """A worker's kernels and judge share the cores with the other workers': the kernels read
    the variable when they import torch; this process imported it already (to unpickle this).
    The worker leaves as soon as multiprocessing's finalizers have run (``_leave``)."""
    import torch

    os.environ["OMP_NUM_THREADS"] = str(threads)
    torch.set_num_threads(threads)
    multiprocessing.util.Finalize(None, _leave, exitpriority=LAST)


def _leave() -> None:
    """End a worker once its finalizers ran (its zygote's end among them: autograder/engine/kernels/zygote.py)
    and its results were sent, skipping the interpreter's teardown of torch's, nbgrader's and
    their imports' modules: over a second a worker, waited for at the end of every class graded."""
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    os._exit(0)


def _lost(setup: Setup, lesson: str, student: str, how: str) -> Graded:
    """A submission whose grading ended every process that tried it, recorded as failed."""
    what = f"autograding failed: {how} (out of memory?); not graded"
    lost = Graded(lesson, student, {}, [Problem(student, lesson, what)], failure=how)
    verdicts.write(setup.workspace, lost)
    return lost


def longest_first(pairs: list[Key]) -> list[Key]:
    """``pairs`` in the order to hand them to workers: the submissions whose grading builds C++
    (a minute each, where a Python lesson takes seconds) first, so that the short ones fill the
    workers' time around them instead of one worker building alone at the end; else as given."""
    return sorted(pairs, key=lambda key: key.lesson not in CPP_LESSONS)


def on_processes(setup: Setup, pairs: list[Key], jobs: int) -> Iterator[Graded]:
    """Grade ``pairs`` in ``jobs`` worker processes, longest first (``longest_first``); yields
    each as it is done. A pool whose process died (the kernel's limits contain a submission, but
    not the grader itself) is replaced once, and what it had not finished is graded again."""
    threads = max(1, (os.cpu_count() or 1) // jobs)
    remaining = longest_first(list(pairs))
    for _ in range(2):
        lost = []
        with ProcessPoolExecutor(
            max_workers=jobs,
            mp_context=multiprocessing.get_context("spawn"),  # no grader state forked into workers
            initializer=start_worker,
            initargs=(threads,),
        ) as pool:
            futures = {pool.submit(grade_task, setup, key.lesson, key.student): key for key in remaining}
            for future in as_completed(futures):
                try:
                    yield future.result()
                except BrokenProcessPool:
                    lost.append(futures[future])
        remaining = lost
        if not remaining:
            return
    yield from (_lost(setup, key.lesson, key.student, "its grading process died, twice") for key in remaining)


def on_dask(setup: Setup, pairs: list[Key], scheduler: str) -> Iterator[Graded]:
    """Grade ``pairs`` on the Dask cluster at ``scheduler`` (e.g. ``tcp://10.0.0.5:8786``).

    Every worker must see the repository and the workspace at the same paths as this machine
    (a shared file system), and the gradebook must be one they all reach (PostgreSQL).
    The scheduler reruns a task whose worker was lost; a task that kills worker after worker
    (Dask's ``allowed-failures``) is reported, and the others are still graded.
    """
    from distributed import Client, as_completed
    from distributed.scheduler import KilledWorker

    with Client(scheduler) as client:
        futures = {
            client.submit(
                grade_task, setup, lesson, student, key=f"autograde-{lesson}-{student}", pure=False
            ): (
                lesson,
                student,
            )
            for student, lesson in pairs
        }
        for future in as_completed(futures):
            try:
                yield future.result()
            except KilledWorker:
                yield _lost(setup, *futures[future], "it ended every Dask worker that graded it")
