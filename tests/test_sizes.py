"""No hand-written file over 600 lines (issue 37): a maintainer fixing a typo reads a file whole.
The built notebooks and derived lists are not counted (their suffixes are not among these)."""

import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LIMIT = 600
WRITTEN_BY_HAND = (".py", ".sh", ".cjs", ".md", ".toml", ".yml", ".cfg", ".j2", ".html", ".css")


def written_by_hand() -> list[str]:
    tracked = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True)
    return [
        name
        for name in tracked.stdout.splitlines()
        if name.endswith(WRITTEN_BY_HAND) or Path(name).name == "Makefile"
    ]


def test_no_hand_written_file_is_over_600_lines():
    files = written_by_hand()
    assert "autograder/checks/core.py" in files and "solutions/lesson_scripts/10_training.py" in files
    over = {name: n for name in files if (n := len((ROOT / name).read_text().splitlines())) > LIMIT}
    assert over == {}, f"over {LIMIT} lines: {over}"
