"""A fresh C++ build, tried once in a throwaway process before any notebook imports it.

A fault in compiled code (a read past a tensor's end, a submodule used before it is registered, a
C++ exception that this machine's toolchain cannot carry into Python, a loop that never ends)
kills or hangs the process that runs it: in a notebook, that is the kernel, with everything the
learner had in it, and no check ever names the cause. So ``try_build`` constructs each module of a
new build and runs its forward on small inputs, in training and in evaluation mode, in a child
process; a child that dies of a signal or does not finish refuses the build with ``CppCrashed``,
which says what happened and what usually causes it. Python exceptions in the child are expected
and ignored (a stub raises NotImplementedError, a wrong shape raises): the checks name those in
the kernel. A crash on other inputs can still happen later; the common ones happen here first.

    python -m autograder.cpp_probe LIBRARY NAME LABEL:INIT,...:FORWARD,... ...   (the child)
    python -m autograder.cpp_probe --wait    (the same, its arguments read from stdin as JSON)

A build starts its trial process before it compiles (``start_trial``): the process imports torch
while the compiler runs, then waits for the library's name.
"""

import importlib.util
import json
import os
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

TRIAL_LIMIT_S = 60.0  # the child imports torch and runs a few tiny forwards: seconds, even under load
SIZES = {"vocab_size": 11, "d_model": 8, "d_ff": 16, "n_heads": 2, "dropout": 0.1}
UNEVEN_HEADS = {"d_model": 10, "n_heads": 3}  # a constructor must refuse it: its error path runs too
BATCH, LENGTH = 2, 3


class CppCrashed(RuntimeError):
    """A new build killed or hung the process that tried it: the message says how, and the usual causes."""


@dataclass(frozen=True)
class Trial:
    """One module of a build to try: its class's name in the extension, and its constructor's and
    forward's argument names (the contract's, which choose the trial's values)."""

    label: str
    init: tuple[str, ...]
    forward: tuple[str, ...]

    def argument(self) -> str:
        return f"{self.label}:{','.join(self.init)}:{','.join(self.forward)}"

    @classmethod
    def parse(cls, argument: str) -> "Trial":
        label, init, forward = argument.split(":")
        return cls(label, tuple(filter(None, init.split(","))), tuple(filter(None, forward.split(","))))


def import_library(name: str, path: Path) -> ModuleType:
    """Import the extension module ``name`` from its library (nothing is written anywhere)."""
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import the C++ build {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


CAUSES = (
    "The usual causes: reading or writing a tensor past its end (data_ptr, accessor, an index "
    "computed by hand); a submodule declared as `torch::nn::Linear w_q{nullptr};` and used before "
    "`register_module` gave it a value; or, when the course's own reference crashes too, a C++ "
    "compiler that does not match this PyTorch (compare `g++ --version` or `clang++ --version` with "
    '`python -c "import torch; print(torch.__config__.show())"`).'
)


def start(command: list[str], stdin: bool = False) -> subprocess.Popen:
    """Start ``command`` in a session of its own, its stdout and stderr together (``stdin``: a pipe)."""
    return subprocess.Popen(
        command,
        stdin=subprocess.PIPE if stdin else None,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )


def finish(child: subprocess.Popen, limit_s: float, given: str | None = None) -> tuple[str, int] | None:
    """``child``'s output and exit status once it ends (``given``: written to its stdin first), or
    None when it outlived ``limit_s`` (then it and every process it started are killed)."""
    try:
        log, _ = child.communicate(given, timeout=limit_s)
    except subprocess.TimeoutExpired:
        stop(child)
        return None
    return log, child.returncode


def stop(child: subprocess.Popen) -> None:
    """Kill ``child`` and every process it started, unless it has ended."""
    if child.poll() is None:
        os.killpg(child.pid, signal.SIGKILL)
        child.communicate()


def run_bounded(command: list[str], limit_s: float) -> tuple[str, int] | None:
    """Run ``command`` in a session of its own: its output (stdout and stderr) and exit status, or
    None when it outlived ``limit_s`` (then it and every process it started are killed)."""
    return finish(start(command), limit_s)


def start_trial() -> subprocess.Popen:
    """A trial process started before its build: it imports torch while the compiler runs, then
    waits for ``try_build`` to name the library. ``stop`` it when the build fails."""
    return start([sys.executable, "-m", "autograder.cpp_probe", "--wait"], stdin=True)


def try_build(
    name: str,
    library: Path,
    trials: list[Trial],
    limit_s: float = TRIAL_LIMIT_S,
    child: subprocess.Popen | None = None,
) -> None:
    """Construct and call every module of the build ``name`` in a child process (``child``: one that
    ``start_trial`` started, else a new one); ``CppCrashed`` when the child dies of a signal or
    outlives ``limit_s``."""
    labels = ", ".join(trial.label for trial in trials)
    arguments = [str(library), name, *(trial.argument() for trial in trials)]
    if child is None:
        finished = run_bounded([sys.executable, "-m", "autograder.cpp_probe", *arguments], limit_s)
    else:
        finished = finish(child, limit_s, json.dumps(arguments) + "\n")
    if finished is None:
        raise CppCrashed(
            f"{labels}: compiled, but constructing it and calling forward on a {BATCH}x{LENGTH} input "
            f"did not finish within {limit_s:.0f} s, in a test process (your kernel was spared): a "
            "loop that never ends? A C++ loop cannot be interrupted from the notebook."
        )
    log, returncode = finished
    if returncode < 0:
        name_of_signal = signal.Signals(-returncode).name
        raise CppCrashed(
            f"{labels}: compiled, but constructing it or calling forward on a {BATCH}x{LENGTH} input "
            f"killed a test process with {name_of_signal} (your kernel was spared). {CAUSES}"
        )
    if returncode != 0:
        tail = "\n".join(log.strip().splitlines()[-5:])
        raise CppCrashed(f"{labels}: compiled, but the build could not be tried:\n{tail}")


def _inputs(names: tuple[str, ...]) -> list:
    import torch

    values = {
        "tokens": torch.randint(0, SIZES["vocab_size"], (BATCH, LENGTH)),
        "mask": torch.ones(BATCH, 1, LENGTH, LENGTH, dtype=torch.bool),
    }
    return [values.get(name, torch.randn(BATCH, LENGTH, SIZES["d_model"])) for name in names]


def _try(trial: Trial, module: ModuleType) -> None:
    """The child's work for one module: construct it (and, with heads, with sizes it must refuse),
    then call forward in training and in evaluation mode; Python exceptions are the checks' to name."""
    cls = getattr(module, trial.label)
    sizes = [SIZES, {**SIZES, **UNEVEN_HEADS}] if "n_heads" in trial.init else [SIZES]
    for chosen in sizes:
        try:
            instance = cls(*(chosen[name] for name in trial.init))
        except Exception:  # noqa: BLE001, S112 - a Python exception is the checks' to name, not a crash
            continue
        for training in (True, False):
            try:
                instance.train(training)
                instance.forward(*_inputs(trial.forward))
            except Exception:  # noqa: BLE001, S112 - as above
                continue


def main(argv: list[str]) -> int:
    if argv == ["--wait"]:
        import torch  # noqa: F401 - the slow part, done while the build compiles

        argv = json.loads(sys.stdin.readline() or "[]")
    if len(argv) < 3:
        print(
            "usage: python -m autograder.cpp_probe LIBRARY NAME LABEL:INIT,...:FORWARD,... ...",
            file=sys.stderr,
        )
        return 2
    library, name, *trials = argv
    import torch  # noqa: F401 - loads libc10 and libtorch, which the build links against

    module = import_library(name, Path(library))
    for trial in map(Trial.parse, trials):
        _try(trial, module)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
