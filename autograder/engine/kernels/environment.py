"""The environment of a sandboxed process: the grader's variables it keeps (``kernel_environment``,
an allow-list), and those the sandbox sets over them (``SANDBOX_VARIABLES``).
"""

import os
from collections.abc import Mapping

# The grader's environment variables a kernel keeps: the search path, the home folder, the
# locale, the thread counts (OMP_NUM_THREADS, MKL_NUM_THREADS, ...), the course's own
# settings (COURSE_DEVICE, COURSE_HIDDEN_SEED), nbgrader's flags, Jupyter's and ipykernel's
# (JPY_SESSION_NAME, PYDEVD_DISABLE_FILE_VALIDATION), IPython's and matplotlib's.
KERNEL_VARIABLES = frozenset(
    {
        "PATH",
        "HOME",
        "LANG",
        "LANGUAGE",
        "TZ",
        "NBGRADER_EXECUTION",
        "NBGRADER_VALIDATING",
        "PYDEVD_DISABLE_FILE_VALIDATION",
        "IPYTHONDIR",
        "MPLBACKEND",
        "MPLCONFIGDIR",
    }
)
KERNEL_PREFIXES = ("LC_", "COURSE_", "JPY_")
KERNEL_SUFFIXES = ("_NUM_THREADS",)
CPP_CACHE_VARIABLE, CPP_CACHE_IN_SANDBOX = "COURSE_CPP_CACHE", "/tmp/course-cpp"  # autograder/libtorch.py
# the grader's own, never a kernel's: where the grader keeps its C++ header (autograder/cpp_pch.py)
GRADER_CPP_CACHE_VARIABLE = "COURSE_GRADER_CPP_CACHE"


def kernel_environment(environment: Mapping[str, str], shared_cpp_cache: str = "") -> dict[str, str]:
    """The variables of ``environment`` that a grading kernel may see (an allow-list: the
    constants above); the rest, the grader's passwords, tokens and keys among them, stay out.
    ``shared_cpp_cache``: the grader's cache of trusted C++ builds (read-only in the sandbox), if any."""
    kept = {
        name: value
        for name, value in environment.items()
        if (name in KERNEL_VARIABLES or name.startswith(KERNEL_PREFIXES) or name.endswith(KERNEL_SUFFIXES))
        and name != GRADER_CPP_CACHE_VARIABLE
    }
    # lesson 12 builds C++ in the sandbox's private /tmp (swept between notebooks), never in a
    # folder another kernel could see, nor in the small hidden home folder; finished builds are
    # also found in the grader's shared cache, which the sandbox binds read-only (shared_folders)
    caches = [CPP_CACHE_IN_SANDBOX, *([shared_cpp_cache] if shared_cpp_cache else [])]
    kept[CPP_CACHE_VARIABLE] = os.pathsep.join(caches)
    return kept


# The variables the sandbox itself sets. In its own process namespace the kernel's parent is
# pid 1, which ipykernel knows never to watch (the grader's pid means nothing in there). IPython
# and matplotlib keep their settings and caches in the home folder, hidden here: they get the
# private /tmp.
SANDBOX_VARIABLES = {"JPY_PARENT_PID": "1", "IPYTHONDIR": "/tmp/ipython", "MPLCONFIGDIR": "/tmp/matplotlib"}
