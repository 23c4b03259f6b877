#!/usr/bin/env bash
# The course's GPU checks in one go, for the GPU workflow and for anyone with a GPU, on a machine
# that has its own CUDA build of PyTorch and needs no network:
#   setup       tests/gpu_env.sh: .venv-gpu/ with $PYTHON's torch and the wheels in $COURSE_WHEELS
#               (wheels/; tests/gpu_wheels.sh downloads them where there is network);
#   notebooks   every lesson's source notebook, lesson 12 included, with CUDA (nbval);
#   mutations   tests/test_mutations.py on CUDA: the reference package, every catalogued mistake
#               and every alternative through all the visible and hidden checks;
#   benchmarks  the layers and the key/value cache on CUDA, printing their figures.
# It prints one summary line per part and writes every part's log into $GPU_LOGS
# (workspace/gpu-checks/). Each part has a time limit, so that one that hangs cannot take the
# others' time: together they fit in 8 minutes. It stops at once when CUDA is not available, so it
# can never test the CPU by mistake. Exit status: 0 when every part passed.
#
#   PYTHON=python3.12 bash tests/gpu_checks.sh
set -uo pipefail
cd "$(dirname "$0")/.."
python="${PYTHON:-python3}"
logs="${GPU_LOGS:-workspace/gpu-checks}"
venv="${GPU_VENV:-.venv-gpu}"
export PYTHON="$python" GPU_VENV="$venv" COURSE_DEVICE=cuda

"$python" - <<'PY' || exit 1
import sys, torch
if not torch.cuda.is_available():
    sys.exit("CUDA is not available: refusing to run the GPU checks on the CPU")
PY

rm -rf "$logs" && mkdir -p "$logs"
cores=$(nproc)
# Workers: a notebook stays on one worker (--dist loadfile), so more than the 12 lessons would
# idle; the mutation tests are many small float64 checks, one worker per core (each worker
# computes on one thread, conftest.py).
notebook_workers=$((cores < 12 ? cores : 12))
failed=0

# part NAME LIMIT_SECONDS COMMAND...: runs COMMAND into $logs/NAME.log and prints its summary line.
# At its limit the part gets Ctrl-C (SIGINT), so pytest still prints its count of what ran; what
# has not stopped 15 s later is killed.
part() {
  local name=$1 limit=$2 started status summary
  shift 2
  started=$SECONDS
  timeout --signal=INT --kill-after=15 "$limit" "$@" >"$logs/$name.log" 2>&1
  status=$?
  case $name in
    setup) summary=$(tail -n 1 "$logs/$name.log") ;;
    benchmarks) summary=$(grep -hE 'ratio ours|kv cache:|fitted exponents' "$logs/$name.log" | sed 's/^ *//' | paste -sd ';' -) ;;
    *) summary=$(grep -E '[0-9]+ (passed|failed|error)' "$logs/$name.log" | tail -n 1 | tr -d '=' | sed 's/^ *//') ;;
  esac
  [ -n "$summary" ] || summary=$(grep -v '^\s*$' "$logs/$name.log" | tail -n 1)
  if [ "$status" -eq 124 ] || [ "$status" -eq 137 ]; then
    summary="TIMED OUT after ${limit} s; $summary"
  elif [ "$status" -ne 0 ]; then
    summary="FAILED (exit $status); $summary"
  fi
  [ "$status" -eq 0 ] || failed=1
  echo "$name: $summary [$((SECONDS - started)) s, log: $logs/$name.log]" | tee -a "$logs/summary.txt"
  return "$status"
}

part setup 90 bash tests/gpu_env.sh || { echo "no environment, no checks: see $logs/setup.log"; exit 1; }
py="$venv/bin/python"
"$py" -c 'import torch; print(f"torch {torch.__version__}, CUDA {torch.version.cuda}, {torch.cuda.get_device_name(0)}, '"$cores"' cores")' |
  tee -a "$logs/summary.txt"
part notebooks 170 "$py" -m pytest -q -p no:cacheprovider -n "$notebook_workers" --dist loadfile \
  --nbval --nbval-sanitize-with tests/nbval_sanitize.cfg solutions/lessons
part mutations 140 "$py" -m pytest -q -p no:cacheprovider -n "$cores" tests/test_mutations.py
part benchmarks 60 bash -c "'$py' tests/benchmarks/bench_layers.py --device cuda && '$py' tests/benchmarks/bench_kv_cache.py --device cuda"
exit "$failed"
