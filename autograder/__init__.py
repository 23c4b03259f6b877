"""The course's grading side: the checks library learners' test cells call
(``autograder.checks``, free of the solution package), hidden tests against the
reference (``autograder.hidden``), the notebook builder, and the nbgrader set-up."""

import logging
import sys


class _CudaHomeNotice(logging.Filter):
    """Drops the one warning that importing ``torch.utils.cpp_extension`` logs with a CUDA build of
    PyTorch on a machine without a CUDA runtime ("No CUDA runtime is found, using CUDA_HOME=...").
    It concerns CUDA extensions; the course builds CPU ones only (lesson 12), and every lesson's first
    cell imports that module through ``torch.utils.benchmark``: the notice made a first cell's output
    differ from the lesson's on exactly the machines a learner's pip install often makes."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not record.getMessage().startswith("No CUDA runtime is found")


logging.getLogger("torch.utils.cpp_extension").addFilter(_CudaHomeNotice())

# jsonschema imports rfc3987_syntax where it is installed (jupyter-events asks for jsonschema's
# format-nongpl extra), and that module builds a parser at import: about 1 s for every process that
# reads a notebook (nbformat imports jsonschema), each grading worker and kernel included. Nothing
# here checks the "iri" formats it serves, so this process never imports it; jsonschema goes on
# without it as where it is not installed.
sys.modules.setdefault("rfc3987_syntax", None)
