"""The hostile class (tests/hostile_class.py), graded once for the test files that read it; one
machine cache of the grader's C++ header and binding object for the whole run."""

import os

import pytest

# The files whose tests read the graded class, named as pytest names them from the repository's
# root. Under `--dist loadfile` (make test) each file goes to whichever worker is free, and each
# worker grades the class for itself: these files go to one worker together, so that the class
# is graded once a run.
HOSTILE_CLASS_FILES = frozenset(
    {"tests/test_hostile.py", "tests/test_hostile_kernel.py", "tests/test_hostile_leftovers.py"}
)


@pytest.fixture(scope="session")
def graded_hostile_class(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest) -> dict:
    from tests import hostile_class  # imported here: most runs never grade it

    return hostile_class.grade(tmp_path_factory.mktemp("hostile"), request.addfinalizer)


@pytest.fixture(scope="session", autouse=True)
def grader_cpp_cache(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The grader's machine cache of lesson 12's precompiled header and binding object
    (``cpp_pch.machine_cache``) for this run, shared by its workers, never the user's own: the
    suite makes them once, as a machine that grades does (its learners' builds read them too),
    and a second run starts without them, as CI does."""
    from autograder.cpp_pch import MACHINE_VARIABLE

    base = tmp_path_factory.getbasetemp()
    folder = str((base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "grader-cpp")
    os.environ[MACHINE_VARIABLE] = folder  # read by this process and every grader it starts
    return folder


def worker_unit(file: str) -> str:
    """What a worker takes a test file in: the file itself, or all the hostile class's files."""
    return "tests/test_hostile.py" if file in HOSTILE_CLASS_FILES else file


# The files that take longest on one worker (longest first, as timed on 2 cores), started first:
# a worker is then left with short files at the end, never one of these while the other idles.
# Given on the command line, they would not come first: pytest collects a folder's files in its
# own order, and one named before its folder only once, there.
LONGEST_FIRST = (
    "tests/test_pipeline.py",
    "tests/test_browser.py",
    "tests/test_parallel.py",
    "tests/test_judge.py",
    "tests/test_cpp_cache.py",
    "tests/test_hostile.py",
    "tests/test_skipping.py",
    "solutions/lessons/10_training/training.ipynb",
    "tests/test_honest_flags.py",
    "tests/test_honest_flags_half.py",
    "tests/test_libtorch_build.py",
    "tests/test_learner_wheel.py",
    "tests/test_hostile_bounds.py",
    "tests/test_isolation.py",
    "solutions/lessons/11_efficiency/efficiency.ipynb",
    "tests/test_zygote.py",
    "tests/test_mutations.py",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """LONGEST_FIRST's files first, in that order; the rest as collected (every worker sorts alike)."""
    rank = {file: index for index, file in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(worker_unit(item.nodeid.split("::")[0]), len(rank)))


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object | None:
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class HostileClassOnOneWorker(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:  # xdist's way to group tests for a worker
            return worker_unit(super()._split_scope(nodeid))

    return HostileClassOnOneWorker(config, log)
