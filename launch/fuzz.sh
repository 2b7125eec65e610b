#!/usr/bin/env bash
# Runs every libFuzzer target (tests/fuzz) for a set time, keeping its corpus and any crash
# inputs, and prints a table (target, seconds, executions, corpus, crashes).
#
#   launch/fuzz.sh [--seconds S] [--out DIR] [--targets "query_parser wire_decoder ..."]
#
# Defaults: 60 s per target, out/fuzz. Builds build-fuzz/ with clang (GPUSEARCH_FUZZ=ON:
# -fsanitize=fuzzer,address,undefined) when its binaries are missing. Corpora grow in
# DIR/corpus/TARGET (seeded from tests/fuzz/seeds/TARGET), crash inputs land in
# DIR/crashes/TARGET/, logs in DIR/logs/, the table in DIR/fuzz-report.{md,json}. A crash input
# becomes a regression test by moving it to tests/fuzz/regressions/TARGET/ (FuzzRegressions.*
# in the unit tests runs every file there). Exit 1 when any target crashed.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
seconds=60 out=$root/out/fuzz targets="query_parser corpus_reader wire_decoder index_open"
while [ $# -gt 0 ]; do
  case "$1" in
    --seconds) seconds=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --targets) targets=$2; shift 2 ;;
    -h|--help) sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "fuzz.sh: unknown flag $1" >&2; exit 2 ;;
  esac
done
command -v clang++ > /dev/null || {
  echo "fuzz.sh: clang++ is missing (apt-get install clang)" >&2; exit 2; }
build=${GPUSEARCH_FUZZ_BUILD_DIR:-$root/build-fuzz}
missing=0
for t in $targets; do [ -x "$build/bin/fuzz_$t" ] || missing=1; done
if [ "$missing" = 1 ]; then
  echo "fuzz.sh: building the fuzz targets in $build (clang, ASan, UBSan, libFuzzer)"
  CC=clang CXX=clang++ cmake -S "$root" -B "$build" -DGPUSEARCH_CUDA=OFF -DGPUSEARCH_FUZZ=ON \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo > /dev/null
  cmake --build "$build" -j"${GPUSEARCH_BUILD_JOBS:-$(nproc)}" --target fuzz_all
fi
mkdir -p "$out/logs"
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:allocator_may_return_null=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
rows=() failed=0
for t in $targets; do
  corpus=$out/corpus/$t crashes=$out/crashes/$t
  mkdir -p "$corpus" "$crashes"
  seeds=()
  [ -d "$root/tests/fuzz/seeds/$t" ] && seeds+=("$root/tests/fuzz/seeds/$t")
  [ -d "$root/tests/fuzz/regressions/$t" ] && seeds+=("$root/tests/fuzz/regressions/$t")
  echo "fuzz.sh: $t for $seconds s"
  set +e
  "$build/bin/fuzz_$t" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
    -max_len=65536 -print_final_stats=1 -artifact_prefix="$crashes/" "$corpus" "${seeds[@]}" \
    > "$out/logs/$t.log" 2>&1
  rc=$?
  set -e
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$out/logs/$t.log" | tail -1)
  found=$(find "$crashes" -type f | wc -l)
  size=$(find "$corpus" -type f | wc -l)
  [ "$rc" = 0 ] && [ "$found" = 0 ] || failed=1
  rows+=("$t $seconds ${execs:-0} $size $found $rc")
done
{
  echo "| target | seconds | executions | corpus files | crash inputs | exit |"
  echo "| --- | --- | --- | --- | --- | --- |"
  for r in "${rows[@]}"; do set -- $r; echo "| $1 | $2 | $3 | $4 | $5 | $6 |"; done
} | tee "$out/fuzz-report.md"
python3 - "$out" "${rows[@]}" <<'EOF'
import json, sys
out, rows = sys.argv[1], sys.argv[2:]
keys = ["target", "seconds", "executions", "corpus_files", "crash_inputs", "exit"]
table = [dict(zip(keys, [r.split()[0]] + [int(x) for x in r.split()[1:]])) for r in rows]
json.dump({"targets": table}, open(f"{out}/fuzz-report.json", "w"), indent=2)
EOF
[ "$failed" = 0 ] || { echo "fuzz.sh: crashes or failures; inputs under $out/crashes, logs under $out/logs" >&2; exit 1; }
