#!/usr/bin/env bash
# Index-build and codec benchmarks (issue "Foundation"): builds a synthetic collection of
# DOCS documents (default 2,500,000) and the real collections, then times CPU block decoding.
# Writes JSON to OUT (default build/bench/index) and prints a summary table.
#   launch/bench-index.sh [DOCS]
set -euo pipefail
cd "$(dirname "$0")/.."
docs=${1:-2500000}
out=${OUT:-build/bench/index}
bin=build/bin
mkdir -p "$out"
[ -x $bin/gpusearch ] && [ -x $bin/bench_codec ] || launch/build.sh
work=${WORK:-$out/work}
mkdir -p "$work"
echo "== synthetic, $docs documents"
$bin/gpusearch -q index --synthetic "docs=$docs,seed=7" --out "$work/synthetic" --force \
  --report "$out/build_synthetic.json"
if [ -s build/data/debian-descriptions.jsonl ]; then
  echo "== Debian package descriptions"
  $bin/gpusearch -q index --corpus build/data/debian-descriptions.jsonl --out "$work/debian" --force \
    --report "$out/build_debian.json"
fi
if [ -s ../shared/data/cranfield/corpus.jsonl ]; then
  echo "== Cranfield"
  $bin/gpusearch -q index --corpus ../shared/data/cranfield/corpus.jsonl --out "$work/cranfield" \
    --force --report "$out/build_cranfield.json"
fi
echo "== codec decode speed (one core)"
$bin/bench_codec --index "$work/synthetic" --out "$out/codec_synthetic.json"
[ -d "$work/debian" ] && $bin/bench_codec --index "$work/debian" --out "$out/codec_debian.json"
{ lscpu | grep -m1 "Model name"; nproc; } > "$out/machine.txt"
echo "results in $out"
