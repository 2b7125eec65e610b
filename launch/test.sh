#!/usr/bin/env bash
# Installs what is missing, builds, and runs every test (unit, MPI integration; GPU tests skip
# with a message where no GPU is present). Ends with ctest's summary.
set -euo pipefail
cd "$(dirname "$0")/.."
launch/install-deps.sh
launch/build.sh "$@"
ctest --test-dir build --output-on-failure -j"$(nproc)"
