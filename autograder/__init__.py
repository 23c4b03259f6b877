"""The course's grading side: the checks library learners' test cells call
(``autograder.checks``, free of the solution package), hidden tests against the
reference (``autograder.hidden``), the notebook builder, and the nbgrader set-up."""
