"""The learner's wheel, tested as a learner uses it (issue 23): built from this repository's
pyproject.toml, installed into a fresh virtual environment outside the checkout, and run with
the checkout hidden (bubblewrap mounts an empty folder over it), an empty PYTHONPATH and the
working folder elsewhere. Offline: the fresh environment finds its dependencies (torch,
nbclient, ipykernel) in the main environment's site-packages through one .pth line, which adds
that folder to sys.path without running the .pth files in it, so the checkout's editable
install never loads there (the tests assert where ``autograder`` comes from).

One wheel, one environment and one run of tests/learner_route.py serve the whole module.
"""

import json
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import nbformat
import pytest
import yaml
from nbclient import NotebookClient

from autograder import capstone, lessons
from autograder.authoring.samples import SAMPLES

ROOT = Path(__file__).resolve().parent.parent
VENV = Path(sys.prefix)
LEARNER_PACKAGES = {"checks", "course"}  # autograder's sub-folders in the wheel
EXERCISE = "scaled_dot_product_attention"


class Learner:
    """The wheel, the fresh environment it is installed in, and how to run a command there."""

    def __init__(self, place: Path):
        self.place = place
        self.home = place / "home"  # HOME, the working folder: neither the checkout nor the package
        self.venv = place / "venv"
        self.home.mkdir()
        self.wheel = self._build()
        subprocess.run([sys._base_executable, "-m", "venv", str(self.venv)], check=True, timeout=300)
        (site,) = self.venv.glob("lib/python3*/site-packages")
        (site / "course_dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
        pip = [str(self.venv / "bin" / "python"), "-m", "pip", "install", "-q", "--no-deps", "--no-index"]
        subprocess.run([*pip, str(self.wheel)], check=True, capture_output=True, timeout=300)
        self.site = site

    def _build(self) -> Path:
        """The wheel, built from a copy of the checkout's packages (building writes build/ and
        *.egg-info beside its sources, and a stale build/ could slip old files in)."""
        source = self.place / "source"
        for folder in ("autograder", "solutions", "course"):
            shutil.copytree(ROOT / folder, source / folder, ignore=shutil.ignore_patterns("__pycache__"))
        shutil.copy(ROOT / "pyproject.toml", source)
        command = [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "-q",
            "--no-deps",
            "--no-build-isolation",
            "--no-index",
        ]
        built = subprocess.run([*command, str(source), "-w", str(self.place)], capture_output=True, text=True)
        assert built.returncode == 0, f"the wheel did not build:\n{built.stdout}{built.stderr}"
        (wheel,) = self.place.glob("*.whl")
        return wheel

    def run(self, *args: str, timeout: int = 900) -> subprocess.CompletedProcess:
        """``python *args`` in the fresh environment, with the checkout hidden (only the main
        environment's folder, read-only, shows through) and the installed package read-only."""
        hide = [
            "--tmpfs",
            str(ROOT),
            "--ro-bind",
            str(VENV),
            str(VENV),
            "--ro-bind",
            str(self.venv),
            str(self.venv),
        ]
        command = ["bwrap", "--dev-bind", "/", "/", *hide, "--chdir", str(self.home)]
        environment = {"PATH": f"{self.venv / 'bin'}:/usr/bin:/bin", "HOME": str(self.home), "PYTHONPATH": ""}
        return subprocess.run(
            [*command, str(self.venv / "bin" / "python"), *args],
            env=environment,
            capture_output=True,
            text=True,
            timeout=timeout,
        )


@pytest.fixture(scope="module")
def learner(tmp_path_factory) -> Learner:
    if shutil.which("bwrap") is None:
        pytest.fail(
            "bubblewrap (bwrap) is missing: `make sandbox` installs it; this test hides the checkout with it"
        )
    return Learner(tmp_path_factory.mktemp("learner"))


@pytest.fixture(scope="module")
def route(learner) -> dict:
    """tests/learner_route.py, run in the learner's environment on an empty folder: its report."""
    shutil.copy(ROOT / "tests" / "learner_route.py", learner.home)
    folder, report = learner.place / "my lessons", learner.home / "report.json"
    ran = learner.run("learner_route.py", str(folder), str(report))
    assert ran.returncode == 0, f"the learner's route failed:\n{ran.stdout}\n{ran.stderr[-4000:]}"
    return {**json.loads(report.read_text()), "folder": folder}


def test_the_wheel_holds_what_a_learner_needs_and_nothing_of_the_instructors(learner):
    names = zipfile.ZipFile(learner.wheel).namelist()
    tops = {name.split("/")[0] for name in names}
    assert tops == {"autograder", "solutions", "transformer_course-0.1.0.dist-info"}
    assert {
        name.split("/")[1] for name in names if name.count("/") > 1 and name.startswith("autograder/")
    } == (LEARNER_PACKAGES)
    assert {"autograder/capstone.py", "autograder/timing.py", "autograder/learner.py"} <= set(names)
    catalogue = {Path(n).name for n in names if n.startswith("autograder/checks/catalogue/")}
    assert catalogue == {p.name for p in (ROOT / "autograder/checks/catalogue").glob("*.toml")}
    assert not [n for n in names if n.startswith("solutions/") and n.count("/") > 1]  # no source notebooks
    wheel = zipfile.ZipFile(learner.wheel)
    notebooks = [n for n in names if n.endswith(".ipynb")]
    assert not [
        n for n in notebooks if b"BEGIN HIDDEN TESTS" in wheel.read(n) or b"BEGIN SOLUTION" in wheel.read(n)
    ]
    # every lesson's notebook, byte for byte the checkout's course/
    for lesson in lessons.LESSON_NAMES:
        packed = wheel.read(f"autograder/course/{lesson}/{lessons.notebook_name(lesson)}")
        assert packed == lessons.course_path(lesson).read_bytes(), lesson


PROBE = """
import importlib, importlib.util, os, pkgutil, sys
sys.modules["nbgrader"] = None  # any import of nbgrader now fails: the learner's wheel must not need it
import autograder, solutions
print(autograder.__file__)
print(sorted(os.listdir(sys.argv[1])))
print(importlib.util.find_spec("autograder.engine"), importlib.util.find_spec("autograder.hidden"))
modules = [m.name for p in (autograder, solutions)
           for m in pkgutil.walk_packages(p.__path__, p.__name__ + ".")]
for name in modules:
    if name != "autograder.__main__":
        importlib.import_module(name)
print(len(modules))
"""


def test_the_installed_package_is_the_wheels_and_the_checkout_is_out_of_sight(learner):
    ran = learner.run("-c", PROBE, str(ROOT))
    assert ran.returncode == 0, ran.stderr
    package, visible, absent, imported = ran.stdout.splitlines()
    assert Path(package).is_relative_to(learner.site)
    assert visible == "['.venv']"  # the checkout: an empty folder, but for the dependencies' environment
    assert absent == "None None"  # no engine, no hidden tests
    assert int(imported) > 30  # every module of the wheel imports without nbgrader


def test_the_lessons_go_into_an_empty_folder_and_say_how_to_open_them(route):
    folder = route["folder"]
    assert route["files"] == [f"{lesson}/{lessons.notebook_name(lesson)}" for lesson in lessons.LESSON_NAMES]
    assert f'jupyter lab "{folder}"' in route["lessons"]["stdout"]


def test_lesson_03_names_a_catalogued_mistake_and_passes_the_right_answer(route):
    mistake = "your output matches a known mistake, scaled by d_k instead of sqrt(d_k)"
    assert route["mistake"] and all(mistake in error for error in route["mistake"].values())
    assert set(route["mistake"]) <= {f"test_{EXERCISE}_{part}" for part in ("values", "mask", "fully_masked")}
    assert route["right"] == {}


def test_the_capstone_finds_the_two_lessons_filled_in_the_learners_folder(route):
    table = route["capstone"].splitlines()
    assert table[0] == f"Your notebooks of lessons 01 to 09, looked for in {route['folder']}:"
    whose = dict(line.strip().split(": ", 1) for line in table[1:] if not line.startswith("KERNEL"))
    assert [part for part, owner in whose.items() if owner == "yours"] == ["Embedding", "LayerNorm"]
    assert set(whose) == {exercise for lesson in capstone.EARLIER for exercise in lessons.EXERCISES[lesson]}
    assert "not written yet" in whose["MultiHeadAttention"]


def test_the_learners_lessons_are_still_theirs_after_a_second_put(learner, route):
    folder = route["folder"]
    saved = (folder / "01_embedding" / "embedding.ipynb").read_bytes()
    again = learner.run("-m", "autograder", "lessons", str(folder))
    assert again.returncode == 0, again.stderr
    assert "kept yours, unchanged: 01_embedding/embedding.ipynb" in again.stdout
    assert (folder / "01_embedding" / "embedding.ipynb").read_bytes() == saved


def _results(nb: nbformat.NotebookNode) -> dict[str, str]:
    """Each test cell's outcome: 'passed', or the error it raised."""
    results = {}
    for cell in nb.cells:
        meta = cell.metadata.get("nbgrader", {})
        if cell.cell_type == "code" and meta.get("grade") and not meta.get("solution"):
            raised = [f"{o.ename}: {o.evalue}" for o in cell.outputs if o.output_type == "error"]
            results[meta["grade_id"]] = raised[0] if raised else "passed"
    return results


def _solution(nb: nbformat.NotebookNode) -> str:
    (cell,) = [c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == EXERCISE]
    return cell.source


def test_a_notebook_from_the_wheel_grades_like_the_sample_in_the_checkout(learner, tmp_path):
    """ben's lesson 03: his own notebook run in the checkout, and his solution cell pasted into
    the wheel's notebook and run in the learner's environment, give each test cell the same result."""
    bens = nbformat.read(SAMPLES / "ben" / "03_attention" / "attention.ipynb", as_version=4)
    in_checkout = _results(
        NotebookClient(
            bens,
            timeout=900,
            kernel_name="python3",
            allow_errors=True,
            resources={"metadata": {"path": str(tmp_path)}},
        ).execute()  # fmt: skip
    )
    assert "passed" in in_checkout.values() and set(in_checkout.values()) != {"passed"}  # a mixed result
    script = (
        "import sys, nbformat, autograder.lessons as l; from nbclient import NotebookClient;"
        "nb = nbformat.read(l.course_path('03_attention'), as_version=4);"
        f"[c.update(source=open(sys.argv[1]).read()) for c in nb.cells if c.metadata.get('nbgrader', {{}})"
        f".get('grade_id') == '{EXERCISE}'];"
        "NotebookClient(nb, timeout=900, kernel_name='python3', allow_errors=True).execute();"
        "nbformat.write(nb, sys.argv[2])"
    )
    (learner.home / "ben.py").write_text(_solution(bens))
    out = learner.home / "ben_from_wheel.ipynb"
    ran = learner.run("-c", script, str(learner.home / "ben.py"), str(out))
    assert ran.returncode == 0, ran.stderr[-4000:]
    assert _results(nbformat.read(out, as_version=4)) == in_checkout


def test_the_workflow_runs_the_same_route_on_macos_windows_and_linux():
    job = yaml.safe_load((ROOT / ".github" / "workflows" / "learner.yml").read_text())["jobs"]["route"]
    systems = job["strategy"]["matrix"]["os"]
    assert {system.split("-")[0] for system in systems} == {"ubuntu", "macos", "windows"}
    commands = "\n".join(step.get("run", "") for step in job["steps"])
    assert "learner_route.py" in commands and "pip wheel" in commands and "python -m venv" in commands
