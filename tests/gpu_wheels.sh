#!/usr/bin/env bash
# Run on a machine with network: downloads the wheels that tests/gpu_checks.sh installs on a GPU
# machine that has its own CUDA build of PyTorch and no network. They are the packages of
# tests/gpu_wheels.txt (what the GPU checks need beyond PyTorch and its own requirements; derived by
# tests/gpu_wheels.py), each without its dependencies, as binary wheels for CPython 3.12 on x86_64
# Linux (glibc 2.28 or later, as PyTorch's CUDA wheels need themselves).
#
#   bash tests/gpu_wheels.sh [FOLDER]       # FOLDER: wheels/ by default (git ignores it)
#   PYTHON_VERSION=3.11 bash tests/gpu_wheels.sh wheels-3.11   # another CPython
#
# Copy FOLDER into the checkout on the GPU machine as wheels/ (or point COURSE_WHEELS at it).
set -euo pipefail
cd "$(dirname "$0")/.."
folder="${1:-wheels}"
version="${PYTHON_VERSION:-3.12}"
python="${PYTHON:-python3}"
# pip matches --platform literally (manylinux2014 adds only 2010 and 1): name every glibc from
# 2.17 to 2.28, since numpy and others ship manylinux_2_27/2_28 wheels only.
platforms=(--platform manylinux2014_x86_64)
for minor in $(seq 17 28); do platforms+=(--platform "manylinux_2_${minor}_x86_64"); done
mkdir -p "$folder"
"$python" -m pip download --quiet --no-deps --only-binary=:all: --implementation cp \
  --python-version "$version" "${platforms[@]}" -d "$folder" -r tests/gpu_wheels.txt
count=$(find "$folder" -name '*.whl' | wc -l)
echo "gpu wheels: $count wheels, $(du -sh "$folder" | cut -f1) in $folder/ for CPython $version" \
  "(tests/gpu_wheels.txt lists $(grep -c . tests/gpu_wheels.txt))"
