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


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object | None:
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class HostileClassOnOneWorker(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:  # xdist's way to group tests for a worker
            return worker_unit(super()._split_scope(nodeid))

    return HostileClassOnOneWorker(config, log)
