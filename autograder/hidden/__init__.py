"""Hidden tests: the learner's code against the reference package on fresh random inputs.

Unlike ``autograder.checks``, these import the solution package. Every call
draws new sizes and values, so an answer hard-coded to pass the visible checks
fails here; a wrong answer still gets the named hint of the mistake it matches.
"""
