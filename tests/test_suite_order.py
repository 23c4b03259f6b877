"""make test starts the files that take longest first (tests/conftest.py, LONGEST_FIRST)."""

from pathlib import Path
from types import SimpleNamespace

from tests.conftest import LONGEST_FIRST, pytest_collection_modifyitems

ROOT = Path(__file__).resolve().parent.parent


def test_every_file_named_to_start_first_is_there():
    assert [file for file in LONGEST_FIRST if not (ROOT / file).is_file()] == []
    assert len(set(LONGEST_FIRST)) == len(LONGEST_FIRST)


def test_the_files_named_come_first_in_their_order_and_the_rest_as_collected():
    collected = [
        "tests/test_catalogue.py::test_a",
        "tests/test_judge.py::test_b[x]",
        "tests/test_hostile_kernel.py::test_c",
        "tests/test_catalogue.py::test_d",
        "tests/test_pipeline.py::test_e",
        "solutions/lessons/10_training/training.ipynb::Cell 1",
        "tests/test_contract.py::test_f",
    ]
    items = [SimpleNamespace(nodeid=nodeid) for nodeid in collected]
    pytest_collection_modifyitems(items)
    assert [item.nodeid for item in items] == [
        "tests/test_pipeline.py::test_e",
        "tests/test_judge.py::test_b[x]",
        "tests/test_hostile_kernel.py::test_c",  # with tests/test_hostile.py, whose class it reads
        "solutions/lessons/10_training/training.ipynb::Cell 1",
        "tests/test_catalogue.py::test_a",
        "tests/test_catalogue.py::test_d",
        "tests/test_contract.py::test_f",
    ]
