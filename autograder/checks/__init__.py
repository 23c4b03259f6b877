"""The checks that learners' test cells call.

Each lesson has a module here (``autograder.checks.attention`` for
03_attention, ...) with one ``check_*`` function per visible test cell and the
computation of that lesson's known mistakes, whose names and hints are data in
``catalogue/<lesson>.toml``. The checks compare a learner's code against PyTorch's
own building blocks (``oracles``) and against the outputs of the known mistakes, so
that a failure names the mistake. This package never imports the solution package:
the checks work in a learner's copy of the course without it.
"""

from autograder.checks.core import CheckFailure, Mistake

__all__ = ["CheckFailure", "Mistake"]
