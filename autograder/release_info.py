"""Where the course is published, and which release a lesson installs where the course is missing.

``REPOSITORY`` is the one place that names the public repository: the lessons' first cells
install ``REQUIREMENT`` from it (a fresh Colab runtime has no course), and the README's
"Open in Colab" links open the lessons' notebooks there. Both point at the release's tag,
never at a branch, so the notebook a learner opens and the checks it installs are the
same release. The requirement is the wheel attached to the release on GitHub
(.github/workflows/release.yml builds and attaches it when the tag is pushed): pip installs it
without git. Until that tag is pushed, neither the wheel nor the Colab links exist.
"""

from autograder import lessons

REPOSITORY = "transformer-course/transformer-course"  # owner/name on GitHub
DISTRIBUTION = "transformer-course"  # pyproject.toml's name
VERSION = "0.1.0"  # pyproject.toml's version (tests/test_release_info.py keeps them equal)
TAG = f"v{VERSION}"
WHEEL = f"{DISTRIBUTION.replace('-', '_')}-{VERSION}-py3-none-any.whl"  # the name `pip wheel .` gives it
WHEEL_URL = f"https://github.com/{REPOSITORY}/releases/download/{TAG}/{WHEEL}"
REQUIREMENT = f"{DISTRIBUTION} @ {WHEEL_URL}"
COLAB_BADGE = "https://colab.research.google.com/assets/colab-badge.svg"


def notebook_in_repository(lesson: str) -> str:
    """'03_attention' -> 'course/03_attention/attention.ipynb', the learner's notebook in the repository."""
    return f"course/{lesson}/{lessons.notebook_name(lesson)}"


def colab_url(lesson: str) -> str:
    """The address that opens ``lesson``'s notebook of this release in Google Colab."""
    return (
        f"https://colab.research.google.com/github/{REPOSITORY}/blob/{TAG}/{notebook_in_repository(lesson)}"
    )


def colab_table() -> str:
    """The README's Markdown table: one row per lesson with its "Open in Colab" badge."""
    rows = [
        f"| `{lesson}` | [![Open in Colab]({COLAB_BADGE})]({colab_url(lesson)}) |"
        for lesson in lessons.LESSON_NAMES
    ]
    return "\n".join(["| lesson | open it in Colab |", "|---|---|", *rows]) + "\n"


def install_lines() -> str:
    """The lines that open every lesson's first code cell (autograder/authoring/build.py puts them
    there): where the course's package is missing (a fresh Colab runtime), they install this
    release; in a clone, a pip install or under grading (no network there) they find it and
    install nothing. When the install fails they stop the notebook with one message: what failed,
    the command to run by hand, and to restart the runtime. The cell is the one a learner's Run
    All stops at when it fails (autograder/engine/keep_going.py leaves it untagged), so no cell
    after it runs without the course."""
    return (
        "import importlib.util\n"
        "import subprocess\n"
        "import sys\n"
        "\n"
        'if importlib.util.find_spec("autograder") is None:  # a fresh Colab runtime: no course here yet\n'
        "    release = (\n"
        f'        "{DISTRIBUTION} @ https://github.com/{REPOSITORY}"\n'
        f'        "/releases/download/{TAG}/{WHEEL}"\n'
        "    )\n"
        '    print(f"The course\'s checks and reference parts are missing here: installing {release}")\n'
        '    pip = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", release])\n'
        "    importlib.invalidate_caches()\n"
        '    if pip.returncode != 0 or importlib.util.find_spec("autograder") is None:\n'
        "        raise RuntimeError(\n"
        '            f"Installing the course failed (pip exited with status {pip.returncode}; "\n'
        '            "its message is above), so no cell below can run. "\n'
        '            "Run this in a new cell by hand:\\n"\n'
        "            f'    %pip install \"{release}\"\\n'\n"
        '            "then restart the runtime (in Colab: Runtime > Restart session) "\n'
        '            "and run this cell again."\n'
        "        )\n"
    )
