"""The learner's command: `python -m autograder lessons DIR` puts the lessons into DIR.

Each lesson's notebook is copied from the installed package (or the repository's
``course/``) into ``DIR/<lesson>/<notebook>``, the layout the capstone of lesson 10 reads
the learner's earlier lessons from. A notebook already there is the learner's work: it is
never replaced, only reported. Nothing is written inside the package. This module imports
nothing of the grading engine, which the learner's wheel does not hold.
"""

import argparse
import shutil
import sys
from pathlib import Path

from autograder import lessons


def put_lessons(folder: Path) -> tuple[list[Path], list[Path]]:
    """Copy every lesson's notebook into ``folder``: (the notebooks written, the ones that
    were there already and were left as they are)."""
    written, kept = [], []
    for lesson in lessons.LESSON_NAMES:
        target = folder / lesson / lessons.notebook_name(lesson)
        if target.exists():
            kept.append(target)
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        # copyfile, not copy: the learner's copy gets ordinary permissions, not the package's
        with lessons.course_path(lesson).open("rb") as source, target.open("xb") as copy:
            shutil.copyfileobj(source, copy)
        written.append(target)
    return written, kept


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m autograder",
        description="The course's lessons. (Grading a class needs the course's repository: this package "
        "holds what a learner's notebooks use.)",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    put = commands.add_parser(
        "lessons",
        help="put the lessons' notebooks into a folder of your choice",
        description="Put every lesson's notebook into DIR/<lesson>/; a notebook already there is kept.",
    )
    put.add_argument("folder", metavar="DIR", type=Path, help="where the lessons go (made if missing)")
    return parser


def main(argv: list[str]) -> int:
    """Run the learner's command ``argv`` (without the program's name); the exit status."""
    folder = _parser().parse_args(argv).folder.expanduser().resolve()
    in_the_way = [p for p in [folder, *(folder / lesson for lesson in lessons.LESSON_NAMES)] if p.is_file()]
    if in_the_way:
        print(
            f"error: {in_the_way[0]} is a file, where a folder for the lessons was expected; "
            "nothing was written. Choose another DIR, or move that file away.",
            file=sys.stderr,
        )
        return 2
    written, kept = put_lessons(folder)
    print(f"Put {len(written)} lesson notebooks into {folder}.")
    for path in kept:
        print(f"  kept yours, unchanged: {path.relative_to(folder)}")
    shown = f'"{folder}"' if " " in str(folder) else str(folder)
    print(f"Open them with:\n\n    jupyter lab {shown}\n")
    print("Lesson 10 reads your earlier lessons from this folder: keep each notebook where it is.")
    return 0
