"""The hostile class (tests/hostile_class.py): what a kernel can reach while it runs.

A kernel sees only its own folder, no network, no other student's keyring and none of the
grader's environment or the machine's root-only files; its memory, processes and /tmp are its
own and capped, and nothing it started outlives its notebook.
"""

import os
import re
from pathlib import Path

from autograder import lessons
from autograder.engine.kernels.sandbox import Limits, memory_cap, pids_cgroups
from tests.hostile_class import (
    GRADER_PASSWORD,
    HONEST,
    KEY,
    LESSON,
    LIMITS,
    MEMORY_GROUPS,
    SECRET,
    graded_folder,
    outputs,
)


def test_a_spy_sees_only_its_own_folder_and_nothing_of_the_home_folder(graded_hostile_class):
    seen = outputs(graded_hostile_class["pipeline"], "spy")
    assert "found: ['../../spy'] ['../../../autograded']" in seen, seen[:2000]
    for student in (*HONEST, "deleter"):
        assert student not in seen.replace("../../spy", "")
    assert "home: [" in seen and SECRET.name not in seen, seen[:2000]


def test_no_network(graded_hostile_class):
    assert graded_hostile_class["received"] == []
    assert "ConnectionRefusedError" in outputs(graded_hostile_class["pipeline"], "caller")


def test_memory_is_capped(graded_hostile_class):
    assert "MemoryError" in outputs(graded_hostile_class["pipeline"], "hog")


def test_no_process_outlives_its_notebook(graded_hostile_class):
    assert graded_hostile_class["leftovers"] == []


def test_tmp_is_private(graded_hostile_class):
    assert not Path("/tmp/course-hostile-tmp-writer").exists()
    refused = outputs(
        graded_hostile_class["pipeline"], "patcher"
    )  # the checks: another user's, on a read-only mount
    assert "Permission denied" in refused or "Read-only file system" in refused, refused[:2000]


def test_a_kernel_that_exits_is_reported_with_its_cell(graded_hostile_class):
    problems = [p.what for p in graded_hostile_class["pipeline"].problems if p.student == "quitter"]
    assert problems == ["autograding failed: the kernel exited while running the solution cell of Embedding"]


def test_processes_are_capped_where_cgroups_can_be_made(graded_hostile_class):
    printed = outputs(graded_hostile_class["pipeline"], "forker")
    if pids_cgroups() is None:  # no cgroup to make here: the sandbox cannot cap, and says so in the README
        assert "started 1000" in printed
        return
    refused = re.search(r"refused after (\d+) BlockingIOError", printed)
    assert refused and int(refused[1]) < Limits.tasks, printed[:2000]


def test_the_graders_environment_stays_outside_the_kernel(graded_hostile_class):
    seen = outputs(graded_hostile_class["pipeline"], "env_spy")
    assert "environment: [" in seen, seen[:2000]
    assert GRADER_PASSWORD not in seen and "PGPASSWORD" not in seen, seen[:2000]
    for page in graded_hostile_class["feedback"]:
        assert GRADER_PASSWORD not in page.read_text()


def test_no_channel_between_students_through_the_keyring(graded_hostile_class):
    assert graded_hostile_class["pipeline"].scores()[("keyring_b_reader", LESSON)] == (1.0, 3.0)
    assert "add_key: -1" in outputs(graded_hostile_class["pipeline"], "keyring_a_writer")
    assert "keyctl: -1 -1" in outputs(graded_hostile_class["pipeline"], "keyring_b_reader")
    assert KEY not in graded_hostile_class["keys"]


def test_shared_memory_counts_against_the_memory_cap(graded_hostile_class):
    score = graded_hostile_class["pipeline"].scores()[("shm_hog", LESSON)]
    if not MEMORY_GROUPS:  # no memory cgroup: shared memory is not capped (the README says so)
        assert score == (3.0, 3.0) and "wrote 5368709120" in outputs(
            graded_hostile_class["pipeline"], "shm_hog"
        )
        return
    assert score == (0.0, 3.0)
    graded = graded_folder(graded_hostile_class["pipeline"], "shm_hog") / lessons.notebook_name(LESSON)
    if not graded.exists():  # its kernel was ended at the cap, in its solution cell
        return
    # or, on a busy machine, stopped at the cell limit while its group was at the cap: it never
    # wrote as much as the group holds (without the cap it writes all 5 GiB in seconds)
    seen = outputs(graded_hostile_class["pipeline"], "shm_hog")
    written = [int(n) for n in re.findall(r"GiB written: (\d+)", seen)]
    assert written and "wrote 5368709120" not in seen
    assert max(written) < memory_cap(LIMITS) / 2**30, seen


def test_root_only_files_stay_unreadable(graded_hostile_class):
    seen = outputs(graded_hostile_class["pipeline"], "root_reader")
    assert "shadow refused: PermissionError" in seen, seen[:2000]
    if os.geteuid() == 0:  # a root grader's kernels run as nobody
        assert "uid 65534" in seen, seen[:2000]
