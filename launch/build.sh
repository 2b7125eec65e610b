#!/usr/bin/env bash
# Configures and builds gpusearch into build/ (binaries in build/bin). CUDA code is compiled
# when nvcc is found (GPUSEARCH_CUDA=AUTO); pass -DGPUSEARCH_CUDA=OFF to skip it.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=${GPUSEARCH_BUILD_JOBS:-$(nproc)}
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release "$@" >/dev/null
cmake --build build -j"$jobs"
