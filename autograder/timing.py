"""One way to time code in the lessons: warm up, repeat, take the median.

A single timed call says little: the first call of a PyTorch operation pays for
allocations and one-time set-up, and any call can be slowed by another program. The
lessons time everything through ``median_seconds``, so that what a learner sees in one
lesson can be compared with what they see in the next.
"""

from collections.abc import Callable

from torch.utils import benchmark


def median_seconds(
    fn: Callable[..., object], *args: object, min_run_time: float = 0.1, threads: int = 1
) -> float:
    """The median time of one call of ``fn(*args)``, in seconds.

    ``fn`` runs once untimed (the warm-up); then ``torch.utils.benchmark.Timer`` runs it in
    blocks of repeated calls for at least ``min_run_time`` seconds and takes the median over
    the blocks. It runs on ``threads`` CPU threads (one by default: the least disturbed by
    other programs), and on a GPU it waits for the device before reading the clock.
    """
    fn(*args)
    timer = benchmark.Timer(stmt="fn(*args)", globals={"fn": fn, "args": args}, num_threads=threads)
    return timer.blocked_autorange(min_run_time=min_run_time).median
