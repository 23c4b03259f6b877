"""The instructor's command line. Run `python -m autograder --help`.

A typical week, from the repository root (the workspace defaults to ./workspace, untracked):

    python -m autograder release 03_attention          # learners' notebook into workspace/release/, gradebook
    python -m autograder collect --folder inbox/        # inbox/<student>/<lesson>/*.ipynb
    python -m autograder collect --zip dl.zip --lesson 03_attention   # or an LMS download
    python -m autograder autograde                      # every submission taken in, one per core at once
    python -m autograder feedback                       # HTML per student and lesson
    python -m autograder export                         # grades.csv, with totals
    python -m autograder export --canvas roster.csv     # Canvas's import (or --moodle), late work applied
    python -m autograder export --moodle roster.csv --lesson 03_attention   # one lesson, graded rows only
    python -m autograder report                         # what could not be graded, and why
    python -m autograder insights                       # which mistakes the class made, cell by cell
    python -m autograder similarity                     # pairs of alike solutions, for a person to look at
    python -m autograder regrade ben --folder inbox/    # one student again; nobody else's grades move

    python -m autograder demo                           # all of it on the bundled samples

A learner's command (it needs only the learner's package, no grading engine):

    python -m autograder lessons DIR                    # every lesson's notebook into DIR
"""

import importlib.util
import sys

if __name__ == "__main__" and (
    sys.argv[1:2] == ["lessons"] or not importlib.util.find_spec("autograder.engine")
):
    # the learner's command, before anything imports the grading engine: the learner's package
    # holds no engine (and no nbgrader), and there every command is the learner's
    from autograder.learner import main as learner_main

    sys.exit(learner_main(sys.argv[1:]))

import argparse
import dataclasses
import os
import shutil
import time
from pathlib import Path

from autograder import lessons
from autograder.engine import cpp_cache
from autograder.engine import workspace as layout
from autograder.engine.kernels.sandbox import Limits
from autograder.engine.pipeline import Pipeline, SandboxUnavailable
from autograder.engine.regrade import regrade
from autograder.engine.submission import Graded
from autograder.instructor import grades
from autograder.instructor.insights import TABLE, insights
from autograder.instructor.similarity import similarity

SAMPLES = Path(__file__).resolve().parent / "sample_submissions"
# the demo's course: roster, due dates and penalty, an extension, and hand-in times that make
# its late work the same whatever day it runs (autograder/instructor/late.py, grades.py, lms.py)
SAMPLE_COURSE = Path(__file__).resolve().parent / "sample_course"
DEMO_MARK = ".course-demo"
# the command line's option for each of the sandbox's limits (Limits' fields), and what it sets
LIMIT_HELP = {
    "memory_gib": "GiB per process",
    "cpu_s": "CPU seconds per kernel",
    "open_files": "open files per process",
    "tasks": "processes and threads per kernel, where cgroups can be made",
    "folder_mib": "MiB kept of the files a submission's kernel leaves in its folder",
    "folder_files": "files and folders kept of what a submission's kernel leaves",
    "file_mib": "MiB of the largest file a submission's kernel may write, while it runs",
    "disk_mib": "MiB a submission's kernel may write to its folders, while it runs",
}  # in a workspace that `demo` made, and so may replace


def _print_problems(pipeline: Pipeline) -> None:
    if not pipeline.problems:
        print("No problems: every submission was graded as handed in.")
        return
    print(f"Problems ({len(pipeline.problems)}):")
    for problem in pipeline.problems:
        print(f"  - {problem.student} / {problem.lesson}: {problem.what}")


GRADER_FAILED = 3  # the exit code when a grading failed for a reason of the grader's own


def grader_failures(done: list[Graded]) -> int:
    """0, or GRADER_FAILED with a one-line banner on stderr when a grading in ``done`` failed for
    a reason of the grader's own (the sandbox, the kernel's start, its imports): such a
    submission has no score until it is graded again."""
    ours = [graded for graded in done if graded.grader_failed]
    if not ours:
        return 0
    print(
        f"GRADING FAILED: {len(ours)} of {len(done)} gradings did not finish for a reason of the grader's "
        f"own, not the submissions' (first: {ours[0].failure}); they have no score in grades.csv and "
        "are left out of the LMS exports: fix the grader, then run autograde again.",
        file=sys.stderr,
    )
    return GRADER_FAILED


def demo(
    workspace: Path, sandbox: Limits | None, run_everything: bool = False, jobs: int = 1, warm: bool = True
) -> int:
    """The whole pipeline on the bundled sample submissions, in a fresh scratch workspace. It
    replaces only a folder that is empty or that an earlier demo made (it holds DEMO_MARK)."""
    start = time.perf_counter()
    if workspace.exists() and any(workspace.iterdir()) and not (workspace / DEMO_MARK).is_file():
        print(
            f"error: {workspace} is not empty and no demo made it: the demo would delete it to start "
            "afresh. Choose another folder with --into.",
            file=sys.stderr,
        )
        return 2
    shutil.rmtree(workspace, ignore_errors=True)
    workspace.mkdir(parents=True)
    (workspace / DEMO_MARK).write_text("made by `python -m autograder demo`, which replaces this folder\n")
    pipeline = Pipeline(
        workspace,
        release=layout.release(workspace),
        sandbox=sandbox,
        run_everything=run_everything,
        warm=warm,
    )
    names = sorted({p.name for p in SAMPLES.glob("*/*") if p.is_dir()}, key=lessons.LESSON_NAMES.index)
    print(f"Demo workspace: {workspace}\nSample submissions: {SAMPLES}\nSample course: {SAMPLE_COURSE}\n")
    for name in (layout.COURSE_FILE, layout.EXTENSIONS_FILE):
        shutil.copy(SAMPLE_COURSE / name, workspace / name)
    inbox = workspace / "inbox"  # the samples, with the hand-in times an LMS would have recorded
    shutil.copytree(SAMPLES, inbox)
    shutil.copytree(SAMPLE_COURSE / "timestamps", inbox, dirs_exist_ok=True)
    pipeline.release(names)
    pipeline.collect_folder(inbox)
    done = pipeline.autograde(jobs)
    print("feedback ...")
    feedback = grades.feedback(pipeline)
    grades_csv = grades.export(pipeline, workspace / "grades.csv")
    roster = SAMPLE_COURSE / "roster.csv"
    canvas = grades.export_lms(pipeline, "canvas", roster, workspace / "canvas.csv")
    moodle = grades.export_lms(pipeline, "moodle-email", roster, workspace / "moodle.csv")
    print("regrade ben's 03_attention, as submitted ...")
    changes = regrade(pipeline, "ben", "03_attention", feedback=grades.feedback)
    page = insights(workspace)
    alike = similarity(workspace)
    pipeline.save_problems()
    graded = len(pipeline.scores())
    elapsed = time.perf_counter() - start
    print(f"\nScores (student x lesson):\n{grades.table(pipeline)}\n")
    _print_problems(pipeline)
    print(f"\nFeedback: {len(feedback)} HTML files under {layout.feedback(workspace)}")
    print(f"Grades:   {grades_csv}\n          {canvas} (Canvas), {moodle} (Moodle), late penalties applied")
    print(f"Regrade:  {_changed(changes)} (log: {workspace / 'regrades.csv'})")
    print(f"Insights: {page}")
    print(f"Similarity: {alike.summary()}")
    print(f"Graded {graded} notebooks in {elapsed:.0f} s ({elapsed / max(graded, 1):.1f} s per notebook).")
    return grader_failures(done)


def _changed(changes: list) -> str:
    """'ben / 03_attention: 1 -> 1 of 6', one per regraded lesson."""
    return "; ".join(
        f"{c.student} / {c.lesson}: {'-' if c.before is None else f'{c.before:g}'} -> {c.after:g} "
        f"of {c.max_score:g}"
        for c in changes
    )


def _at_least_one(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number of at least 1, got {text!r}")
    return int(text)


def _add_jobs(step: argparse.ArgumentParser) -> None:
    step.add_argument(
        "--jobs",
        type=_at_least_one,
        default=os.cpu_count() or 1,
        help="submissions graded at once, each in its own process and kernel (default: the number of "
        "cores, %(default)s); 1 grades one after the other",
    )


def _parser() -> argparse.ArgumentParser:
    """The command line: the workspace, the gradebook, the sandbox's limits, then one step."""
    parser = argparse.ArgumentParser(
        prog="python -m autograder",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        allow_abbrev=False,  # `collect --folder` is not an abbreviation of --folder-mib
    )
    parser.add_argument("--workspace", type=Path, default=Path("workspace"), help="grading workspace")
    parser.add_argument(
        "--db",
        help="the gradebook's SQLAlchemy URL, for a course shared by graders or machines "
        "(e.g. postgresql+psycopg://user@host/course); default: SQLite in the workspace",
    )
    limits = parser.add_argument_group(
        "the grading sandbox",
        "Every grading kernel runs in a sandbox (bubblewrap): the file system read-only, the workspace "
        "hidden but for the submission's own folder, no network, and these limits.",
    )
    for field in dataclasses.fields(Limits):
        limits.add_argument(
            f"--{field.name.replace('_', '-')}",
            type=field.type,
            default=field.default,
            help=f"{LIMIT_HELP[field.name]} (default: %(default)s)",
        )
    parser.add_argument(
        "--run-everything",
        action="store_true",
        help="also run the lessons' experiment cells (figures, timings) while grading; they change "
        "no score, so by default grading skips them",
    )
    limits.add_argument(
        "--cold-kernels",
        action="store_true",
        help="start every grading kernel on its own, importing torch and the checks each time, as "
        "nbgrader does; by default each is forked from a sandboxed zygote that imported them once",
    )
    limits.add_argument(
        "--unsafe",
        action="store_true",
        help="grade without the sandbox, with your own permissions (only for code you trust)",
    )
    steps = parser.add_subparsers(dest="step", required=True)
    release = steps.add_parser(
        "release",
        help="generate learners' notebooks into <workspace>/release/ and record them in the gradebook",
    )
    release.add_argument("lessons", nargs="*", help="default: every lesson")
    collect = steps.add_parser("collect", help="take in submissions from a folder or an LMS zip")
    collect.add_argument("--folder", type=Path, help="a folder laid out <student>/<lesson>/*.ipynb")
    collect.add_argument(
        "--zip",
        type=Path,
        help="a Canvas, Moodle or Blackboard download, or a zip of <student>_<notebook>.ipynb",
    )
    collect.add_argument("--lesson", help="the lesson of the zip's notebooks")
    autograde = steps.add_parser(
        "autograde", help="grade every submission taken in (one failure costs only itself)"
    )
    _add_jobs(autograde)
    autograde.add_argument(
        "--scheduler",
        help="a Dask scheduler's address (tcp://host:8786): its workers grade, each submission one task; "
        "they must see this repository and the workspace at the same paths, and share the gradebook (--db)",
    )
    steps.add_parser("feedback", help="write HTML feedback per student and lesson")
    export = steps.add_parser(
        "export",
        help="write grades.csv (a row per student and lesson, and totals), or an LMS's grade import",
    )
    export.add_argument("--out", type=Path, help="default: <workspace>/grades.csv, canvas.csv or moodle.csv")
    lms_format = export.add_mutually_exclusive_group()
    for option, import_file in (
        ("--canvas", "Canvas's gradebook import"),
        ("--moodle", "Moodle's CSV grade import"),
    ):
        lms_format.add_argument(
            option, type=Path, metavar="ROSTER", help=f"{import_file} for this roster, late penalties applied"
        )
    export.add_argument(
        "--match",
        choices=["email", "id_number"],
        default="email",
        help="the roster column Moodle matches users by",
    )
    export.add_argument(
        "--lesson",
        help="with --canvas or --moodle: only this lesson's column, and only the rows it has a grade for, "
        "so that nothing entered by hand in the LMS is overwritten",
    )
    steps.add_parser("report", help="list the submissions that could not be graded as handed in, and why")
    insights_step = steps.add_parser(
        "insights",
        help="write <workspace>/insights/index.html and insights.csv: pass rates, stubs not attempted, the "
        "named mistakes the class made with what to say, failures no mistake names, answers that pass only "
        "the visible checks, scores, manual scores",
    )
    insights_step.add_argument(
        "--out", type=Path, help="a folder (default: <workspace>/insights/, or insights/<lesson>/)"
    )
    insights_step.add_argument("--lesson", help="only this lesson, on a page of its own")
    similar = steps.add_parser(
        "similarity",
        help="compare learners' solutions pairwise per lesson; write <workspace>/similarity/index.html and "
        "similarity.csv (flags pairs for a person to look at; changes no grade)",
    )
    similar.add_argument("--lesson", action="append", dest="lessons", help="default: every released lesson")
    similar.add_argument(
        "--threshold",
        type=float,
        help="flag from this share of matched code in every lesson (default: each lesson's threshold, "
        "measured on generated classes; the page says how often it flags learners who worked alone)",
    )
    again = steps.add_parser(
        "regrade",
        help="take one student's notebooks in again (or keep them as submitted) and grade only those; "
        "log what changed in <workspace>/regrades.csv",
    )
    again.add_argument("student")
    again.add_argument("--lesson", help="only this lesson (default: every lesson of the student)")
    again.add_argument(
        "--folder", type=Path, help="take the notebooks from <folder>/<student>/<lesson>/*.ipynb"
    )
    again.add_argument("--zip", type=Path, help="take the notebooks from an LMS download (needs --lesson)")
    steps.add_parser(
        "clean-cpp-cache",
        help="remove lesson 12's C++ builds and precompiled header from the workspace (about 0.8 GB "
        "plus 2 MB a unit); grading builds them again",
    )
    demo_parser = steps.add_parser("demo", help="run everything on the bundled sample submissions")
    demo_parser.add_argument("--into", type=Path, default=Path("workspace/demo"), help="scratch workspace")
    _add_jobs(demo_parser)
    return parser


def _sandbox(args: argparse.Namespace) -> Limits | None:
    """The limits the instructor set (None with --unsafe: no sandbox)."""
    if args.unsafe:
        return None
    return Limits(**{field.name: getattr(args, field.name) for field in dataclasses.fields(Limits)})


def _step(pipeline: Pipeline, args: argparse.Namespace) -> int:
    """Run the one step asked for, and print what it made; returns the exit code."""
    done: list[Graded] = []
    if args.step == "release":
        pipeline.release(args.lessons or lessons.written_lessons())
    elif args.step == "collect":
        if args.folder:
            pipeline.collect_folder(args.folder)
        else:
            pipeline.collect_zip(args.zip, args.lesson)
        print(f"{len(pipeline.submissions())} submissions in {pipeline.submitted}")
    elif args.step == "autograde":
        done = pipeline.autograde(args.jobs, args.scheduler)
    elif args.step == "feedback":
        print("\n".join(str(path) for path in grades.feedback(pipeline)))
    elif args.step == "export" and (args.canvas or args.moodle):
        kind, roster = ("canvas", args.canvas) if args.canvas else (f"moodle-{args.match}", args.moodle)
        name = "-".join([kind.split("-")[0], *([args.lesson] if args.lesson else [])])
        print(
            grades.export_lms(pipeline, kind, roster, args.out or args.workspace / f"{name}.csv", args.lesson)
        )
        _print_problems(pipeline)
    elif args.step == "export":
        print(grades.export(pipeline, args.out or args.workspace / "grades.csv"))
        print(grades.table(pipeline))
    elif args.step == "regrade":
        changes = regrade(
            pipeline, args.student, args.lesson, args.folder, args.zip, feedback=grades.feedback
        )
        print(_changed(changes))
        _print_problems(pipeline)
    pipeline.save_problems()
    if args.step == "report":
        print((args.workspace / layout.PROBLEMS_FILE).read_text())
    elif args.step in ("collect", "autograde"):
        _print_problems(pipeline)
    return grader_failures(done)


def _report(args: argparse.Namespace) -> None:
    """A step that reads the graded workspace only (no gradebook, no sandbox), and what it wrote."""
    if args.step == "insights":
        page = insights(args.workspace, args.out, args.lesson, args.db)
        print(f"{page}\n{page.with_name(TABLE)}")
    else:
        print(similarity(args.workspace, args.lessons, args.threshold).summary())


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if args.step == "collect" and (bool(args.folder) == bool(args.zip) or (args.zip and not args.lesson)):
        parser.error("collect takes either --folder DIR, or --zip FILE with --lesson NAME")
    if args.step == "export" and args.lesson and not (args.canvas or args.moodle):
        parser.error(
            "export --lesson needs --canvas ROSTER or --moodle ROSTER (grades.csv holds every lesson)"
        )
    if args.step == "regrade" and ((args.folder and args.zip) or (args.zip and not args.lesson)):
        parser.error(
            "regrade takes at most one of --folder DIR and --zip FILE, and --zip needs --lesson NAME"
        )
    warm = not args.cold_kernels
    try:
        if args.step in ("insights", "similarity"):
            _report(args)
            return 0
        if args.step == "clean-cpp-cache":
            freed = cpp_cache.clean(args.workspace)
            print(f"freed {freed / 2**20:.1f} MiB of C++ builds in {args.workspace}")
            return 0
        if args.step == "demo":
            return demo(args.into, _sandbox(args), args.run_everything, args.jobs, warm)
        pipeline = Pipeline(
            args.workspace,
            sandbox=_sandbox(args),
            run_everything=args.run_everything,
            db_url=args.db,
            warm=warm,
        )
        return _step(pipeline, args)
    # the course's files, a roster, nothing to regrade, no verdicts yet
    except (SandboxUnavailable, ValueError, FileNotFoundError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
