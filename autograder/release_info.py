"""Where the course is published, and which release a lesson installs where the course is missing.

``REPOSITORY`` is the one place that names the public repository: the lessons' first cells
install ``REQUIREMENT`` from it (a fresh Colab runtime has no course), and the README's
"Open in Colab" links open the lessons' notebooks there. Both point at the release's tag,
never at a branch, so the notebook a learner opens and the checks it installs are the
same release.
"""

from autograder import lessons

REPOSITORY = "transformer-course/transformer-course"  # owner/name on GitHub
DISTRIBUTION = "transformer-course"  # pyproject.toml's name
VERSION = "0.1.0"  # pyproject.toml's version (tests/test_release_info.py keeps them equal)
TAG = f"v{VERSION}"
REQUIREMENT = f"{DISTRIBUTION} @ git+https://github.com/{REPOSITORY}@{TAG}"
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
    """The lines that open every lesson's first code cell: where the course's package is missing
    (a fresh Colab runtime), they install this release; in a clone, a pip install or under
    grading (no network there) they find it and install nothing."""
    return (
        "import importlib.util\n"
        "import subprocess\n"
        "import sys\n"
        "\n"
        'if importlib.util.find_spec("autograder") is None:  # a fresh Colab runtime: no course here yet\n'
        f'    release = "{REQUIREMENT}"\n'
        '    print(f"The course\'s checks and reference parts are missing here: installing {release}")\n'
        '    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", release], check=True)\n'
        "    importlib.invalidate_caches()\n"
    )
