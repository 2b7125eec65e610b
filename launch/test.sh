#!/usr/bin/env bash
# Installs what is missing, builds, and runs every test (unit, MPI integration; GPU tests skip
# with a message where no GPU is present). Ends with ctest's summary.
set -euo pipefail
cd "$(dirname "$0")/.."
launch/install-deps.sh
launch/build.sh "$@"
# A real collection for the real-data tests: Debian's package descriptions (needs apt; skipped
# with a message when it cannot be made).
shared_data=$(sed -n 's/^GPUSEARCH_SHARED_DATA_DIR:PATH=//p' build/CMakeCache.txt 2>/dev/null || true)
make_debian=${shared_data:-../shared/data}/make-debian-descriptions.sh
if [ ! -s build/data/debian-descriptions.jsonl ] && [ -x "$make_debian" ]; then
  mkdir -p build/data
  "$make_debian" build/data/debian-descriptions.jsonl.tmp 2>/dev/null &&
    mv build/data/debian-descriptions.jsonl.tmp build/data/debian-descriptions.jsonl ||
    echo "test.sh: could not build the Debian descriptions corpus; its test will be skipped"
fi
ctest --test-dir build --output-on-failure -j"$(nproc)"
