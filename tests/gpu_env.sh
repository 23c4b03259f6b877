#!/usr/bin/env bash
# The GPU checks' environment, made offline (tests/gpu_checks.sh runs this first): a virtual
# environment in $GPU_VENV (.venv-gpu/) that uses $PYTHON's own PyTorch, a CUDA build, never
# replaced, and installs everything else from the wheels in $COURSE_WHEELS (wheels/), which
# tests/gpu_wheels.sh downloads on a machine with network. pip never reaches an index here
# (--no-index): a wheel missing from the folder stops it with pip's "No matching distribution".
# An environment made from the same Python, torch, wheel list and pyproject.toml is kept.
#
#   PYTHON=python3.12 COURSE_WHEELS=wheels bash tests/gpu_env.sh
set -euo pipefail
cd "$(dirname "$0")/.."
python="${PYTHON:-python3}"
wheels="${COURSE_WHEELS:-wheels}"
venv="${GPU_VENV:-.venv-gpu}"

read -r torch_version torch_file < <("$python" -c 'import torch; print(torch.__version__, torch.__file__)' 2>/dev/null)
[ -n "${torch_file:-}" ] || {
  echo "$python cannot import torch: the GPU checks use the machine's own PyTorch (set PYTHON)" >&2
  exit 1
}
ls "$wheels"/*.whl >/dev/null 2>&1 || {
  echo "no wheels in $wheels/: run 'bash tests/gpu_wheels.sh' where there is network and copy" \
    "its folder here (or set COURSE_WHEELS)" >&2
  exit 1
}

stamp="$(command -v "$python") $torch_file $(cat tests/gpu_wheels.txt pyproject.toml | sha256sum | cut -c1-16)"
if [ -f "$venv/gpu-stamp" ] && [ "$(cat "$venv/gpu-stamp")" = "$stamp" ]; then
  echo "environment: $venv kept (made from the same Python, torch, wheel list and pyproject.toml)"
  exit 0
fi
rm -rf "$venv"
"$python" -m venv --system-site-packages "$venv"
# Where $PYTHON finds its packages (a system or user site, or its own venv or conda environment,
# which --system-site-packages alone would miss): the new environment sees them after its own.
site_dirs=$("$python" -c 'import sys; print("\n".join(p for p in sys.path if p.endswith(("site-packages", "dist-packages"))))')
own_site=$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
printf '%s\n' "$site_dirs" >"$own_site/gpu_machine_packages.pth"

pip=("$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-index --find-links "$wheels")
"${pip[@]}" -r tests/gpu_wheels.txt
"${pip[@]}" --no-deps -e .  # the course itself; its build backend (setuptools) is among the wheels

# The environment's torch must be $PYTHON's, not a copy pip brought in
"$venv/bin/python" - "$torch_file" <<'PY'
import sys, torch
if torch.__file__ != sys.argv[1]:
    sys.exit(f"the environment imports torch from {torch.__file__}, not the machine's {sys.argv[1]}")
PY
echo "$stamp" >"$venv/gpu-stamp"
echo "environment: $venv with torch $torch_version from $python, $(grep -c . tests/gpu_wheels.txt) packages from $wheels/"
