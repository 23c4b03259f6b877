"""The other half of tests/test_honest_flags.py's cases (every other one), in a file of its own so
that a run on two workers grades both halves at once."""

import pytest

from tests import test_honest_flags as honest


@pytest.mark.parametrize(**honest.half(1))
def test_no_honest_submission_is_flagged(index, lesson, exercise, kind, mistake, monkeypatch):
    honest.agrees(index, lesson, exercise, kind, mistake, monkeypatch)
