"""Grading many submissions at once gives exactly the grades of grading them one at a time:
worker processes with the SQLite gradebook, the same with a PostgreSQL server (started here),
and a Dask cluster of two worker processes sharing that server, one of them killed mid-run.

The submissions: three learners (one right, one with typical mistakes, one who handed in the
stubs) on two lessons, from the bundled samples. Each run grades them into its own workspace;
every test cell must get the same score and print the same (but for the fresh seeds that
hidden tests draw and name).
"""

import atexit
import multiprocessing
import multiprocessing.util
import os
import re
import shutil
import signal
import threading
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import nbformat
import pytest

from autograder import lessons
from autograder.authoring.samples import SAMPLES
from autograder.engine import parallel
from autograder.engine.pipeline import Pipeline
from autograder.engine.workspace import Key
from tests.postgres import postgres_server

STUDENTS = ("ada", "ben", "cho")
LESSONS = ("03_attention", "09_output_layer")
SEED = re.compile(r"(seed |COURSE_HIDDEN_SEED=)\d+")


@pytest.fixture(scope="module")
def inbox(tmp_path_factory):
    folder = tmp_path_factory.mktemp("inbox")
    for student in STUDENTS:
        for lesson in LESSONS:
            shutil.copytree(SAMPLES / student / lesson, folder / student / lesson)
    return folder


def _grade(workspace, inbox, **autograde) -> Pipeline:
    pipeline = Pipeline(
        workspace, release=workspace / "release", db_url=autograde.pop("db_url", None), log=print
    )
    pipeline.release(list(LESSONS))
    pipeline.collect_folder(inbox)
    pipeline.autograde(**autograde)
    return pipeline


def _outputs(pipeline: Pipeline, student: str, lesson: str) -> dict[str, str]:
    """grade_id -> what the test cell printed, in the graded notebook."""
    path = pipeline.workspace / "autograded" / student / lesson / lessons.notebook_name(lesson)
    found = {}
    for cell in nbformat.read(path, as_version=4).cells:
        meta = cell.metadata.get("nbgrader", {})
        if meta.get("grade") and not meta.get("solution"):
            text = "".join(o.get("text", "") + "".join(o.get("traceback", [])) for o in cell.outputs)
            found[meta["grade_id"]] = SEED.sub(r"\1<seed>", text)
    return found


def _grades(pipeline: Pipeline) -> dict:
    """(student, lesson) -> {grade_id: (score, the test cell's output)}, and the problems."""
    graded = {}
    with pipeline.gradebook() as gb:
        for student in STUDENTS:
            for lesson in LESSONS:
                notebook = lessons.notebook_name(lesson).removesuffix(".ipynb")
                scores = {
                    g.name: g.score for g in gb.find_submission_notebook(notebook, lesson, student).grades
                }
                outputs = _outputs(pipeline, student, lesson)
                graded[student, lesson] = {cell: (score, outputs.get(cell)) for cell, score in scores.items()}
    return {"cells": graded, "problems": sorted(pipeline.problems, key=str)}


@pytest.fixture(scope="module")
def sequential(tmp_path_factory, inbox):
    grades = _grades(_grade(tmp_path_factory.mktemp("sequential"), inbox, jobs=1))
    ben = grades["cells"]["ben", "03_attention"]
    assert 0 < sum(score for score, _ in ben.values()) < len(ben), "ben's mistakes must cost some points"
    return grades


def _assert_same(grades: dict, sequential: dict) -> None:
    for key, cells in sequential["cells"].items():
        assert grades["cells"][key] == cells, f"{key} graded differently from the sequential run"
    assert grades["problems"] == sequential["problems"]


def test_worker_processes_grade_as_one_at_a_time(tmp_path, inbox, sequential):
    _assert_same(_grades(_grade(tmp_path, inbox, jobs=2)), sequential)


def test_worker_processes_on_postgresql_grade_as_sqlite(tmp_path, inbox, sequential):
    with postgres_server() as url:
        pipeline = _grade(tmp_path, inbox, jobs=2, db_url=url)
        assert not (tmp_path / "gradebook.db").exists(), "the grades went to SQLite, not PostgreSQL"
        _assert_same(_grades(pipeline), sequential)


def _kill_a_busy_worker(client, killed: list) -> None:
    """Wait until a worker is grading a submission, then kill its process (SIGKILL: no goodbye)."""
    pids = client.run(os.getpid)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        busy = [worker for worker, tasks in client.processing().items() if tasks]
        if busy:
            time.sleep(2)  # inside the submission's notebook, not before it
            os.kill(pids[busy[0]], signal.SIGKILL)
            killed.append(busy[0])
            return
        time.sleep(0.2)


def test_dask_cluster_loses_no_submission_when_a_worker_dies(tmp_path, inbox, sequential):
    from distributed import Client, LocalCluster

    with (
        postgres_server() as url,
        LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster,
        Client(cluster) as client,
    ):
        killed: list[str] = []
        killer = threading.Thread(target=_kill_a_busy_worker, args=(client, killed))
        killer.start()
        pipeline = _grade(tmp_path, inbox, scheduler=cluster.scheduler_address, db_url=url)
        killer.join()
        assert killed, "no worker was ever seen grading, so none was killed"
        _assert_same(_grades(pipeline), sequential)


def test_the_submissions_that_build_cpp_go_to_the_workers_first():
    pairs = [Key(student, lesson) for lesson in ("01_embedding", "12_libtorch") for student in ("ada", "ben")]
    assert parallel.longest_first(pairs) == [pairs[2], pairs[3], pairs[0], pairs[1]]


def _mark_the_exit(folder: str) -> None:
    """In a worker: a file made by a finalizer of multiprocessing's (as the zygote's end is), and
    one by the interpreter's own exit."""
    multiprocessing.util.Finalize(None, Path(folder, "finalizer").touch, exitpriority=0)
    atexit.register(Path(folder, "teardown").touch)


def test_a_worker_runs_its_finalizers_then_leaves_without_the_interpreters_teardown(tmp_path):
    """The zygote's end (a finalizer) still runs; the second of tearing down torch's modules does not."""
    with ProcessPoolExecutor(
        1, mp_context=multiprocessing.get_context("spawn"), initializer=parallel.start_worker, initargs=(1,)
    ) as pool:
        pool.submit(_mark_the_exit, str(tmp_path)).result()
    assert (tmp_path / "finalizer").exists()
    assert not (tmp_path / "teardown").exists()
