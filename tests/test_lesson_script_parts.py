"""A lesson script may go on in numbered parts (``<lesson>.2.py``, ...), which the builder reads
as one script (lessons.script_parts): lessons 10 and 11 are too long for one hand-written file."""

import pytest

from autograder import lessons
from autograder.authoring import build

FIRST = "# %% [markdown]\n# # A lesson\n\n# %% install\nimport torch\n"
SECOND = "# %% [markdown]\n# ## Its second part\n\n# %%\nx = torch.zeros(2)\n"


@pytest.fixture
def scripts(tmp_path, monkeypatch):
    monkeypatch.setattr(lessons, "SCRIPTS", tmp_path)
    return tmp_path


def test_a_lesson_is_its_script_then_its_numbered_parts(scripts):
    (scripts / "03_attention.py").write_text(FIRST)
    assert lessons.script_parts("03_attention") == [scripts / "03_attention.py"]
    (scripts / "03_attention.2.py").write_text(SECOND)
    (scripts / "03_attention.4.py").write_text(SECOND)  # no part 3: not read
    assert lessons.script_parts("03_attention") == [
        scripts / "03_attention.py",
        scripts / "03_attention.2.py",
    ]
    sources = [cell.source for cell in build.build_source("03_attention").cells]
    assert sources[0] == "# A lesson" and sources[2:] == ["## Its second part", "x = torch.zeros(2)"]
    assert [cell["id"] for cell in build.build_source("03_attention").cells] == [
        "text-01",
        "code-01",
        "text-02",
        "code-02",
    ]


def test_a_part_must_start_at_a_cell_header(scripts):
    (scripts / "03_attention.py").write_text(FIRST)
    (scripts / "03_attention.2.py").write_text("x = 1\n" + SECOND)
    with pytest.raises(ValueError, match="text before the first '# %%' header: 'x = 1'"):
        build.build_source("03_attention")


@pytest.mark.parametrize("lesson", ["10_training", "11_efficiency"])
def test_lessons_10_and_11_are_written_in_parts_under_600_lines(lesson):
    parts = lessons.script_parts(lesson)
    assert len(parts) == 2
    assert all(len(part.read_text().splitlines()) < 600 for part in parts)
