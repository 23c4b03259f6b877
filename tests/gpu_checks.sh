#!/usr/bin/env bash
# The course's GPU checks in one go, for the GPU workflow and for anyone with a GPU:
# every lesson's source notebook with CUDA (nbval); the mutation tests on CUDA, which run
# the reference package, every catalogued mistake and every alternative through all the
# visible and hidden checks there; and the benchmarks, printing their figures. (The
# reference-against-PyTorch tests run on the CPU job.)
# It stops at once when CUDA is not available, so it can never test the CPU by mistake.
set -euo pipefail
cd "$(dirname "$0")/.."
make setup
export PATH="$PWD/.venv/bin:$PATH" COURSE_DEVICE=cuda
python - <<'PY'
import sys, torch
if not torch.cuda.is_available():
    sys.exit("CUDA is not available: refusing to run the GPU checks on the CPU")
print(f"torch {torch.__version__}, CUDA {torch.version.cuda}, {torch.cuda.get_device_name(0)}")
PY
python -m pytest -q tests/test_mutations.py
python -m pytest -q --nbval --nbval-sanitize-with tests/nbval_sanitize.cfg solutions/lessons
python tests/benchmarks/bench_layers.py --device cuda
