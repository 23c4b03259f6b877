"""Settings for the whole test suite.

`make test` runs one pytest-xdist worker per core. Each worker's own torch, its notebook
kernels and its subprocesses compute on one thread: two workers' kernels with two OpenMP
threads each would share two cores four ways, and threads that spin while they wait for
each other slow everyone. No lesson's output depends on the number of threads (nbval
passes with one and with several).
"""

import os

if os.environ.get("PYTEST_XDIST_WORKER"):
    os.environ.setdefault("OMP_NUM_THREADS", "1")
