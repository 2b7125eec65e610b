#!/usr/bin/env bash
# Installs what is missing, builds, and runs every test (unit, MPI integration; GPU tests skip
# with a message where no GPU is present). Ends with ctest's summary.
#
#   launch/test.sh [cmake flags...]   the Release build in build/ and every test
#   launch/test.sh --sanitize         an AddressSanitizer + UndefinedBehaviorSanitizer build in
#                                     build-sanitize/ (GPUSEARCH_SANITIZE=ON) running the unit
#                                     and MPI tests (Open MPI's own leaks are suppressed:
#                                     launch/lsan.supp)
#
# When clang is present, a short smoke of every libFuzzer target follows (launch/fuzz.sh,
# GPUSEARCH_FUZZ_SMOKE_SECONDS each, default 10; GPUSEARCH_FUZZ_SMOKE_SECONDS=0 skips it).
set -euo pipefail
cd "$(dirname "$0")/.."
launch/install-deps.sh
if [ "${1:-}" = --sanitize ]; then
  shift
  jobs=${GPUSEARCH_BUILD_JOBS:-$(nproc)}
  cmake -S . -B build-sanitize -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGPUSEARCH_CUDA=OFF \
    -DGPUSEARCH_SANITIZE=ON "$@" > /dev/null
  cmake --build build-sanitize -j"$jobs"
  export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:strict_string_checks=1}
  export LSAN_OPTIONS=${LSAN_OPTIONS:-suppressions=$PWD/launch/lsan.supp:print_suppressions=0}
  export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
  # Unit and MPI tests (the study tests drive Python over the same binaries: left to the
  # Release run). Sanitized code runs several times slower: the MPI tests' timeouts stretch.
  ctest --test-dir build-sanitize --output-on-failure -j"$(nproc)" -E '^study\.' \
    --timeout 600
  exit
fi
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
smoke=${GPUSEARCH_FUZZ_SMOKE_SECONDS:-10}
if [ "$smoke" != 0 ] && command -v clang++ > /dev/null; then
  echo "test.sh: libFuzzer smoke, $smoke s per target (launch/fuzz.sh)"
  launch/fuzz.sh --seconds "$smoke" --out build-fuzz/smoke
fi
