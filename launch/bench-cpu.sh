#!/usr/bin/env bash
# CPU engine benchmark (issue "The CPU engine at the state of the art"): every algorithm at
# k = 10, 100, 1000 on a synthetic index (2,500,000 documents unless SYN_DOCS says otherwise)
# and on the Debian package descriptions, for bm25 and bm25-pr. Writes JSON to OUT (default
# build/bench/cpu) and prints the tables; tests/benchmarks/NOTES-cpu-engine.md has the numbers.
#   launch/bench-cpu.sh [QUERIES_PER_RUN]
# Env: SYN_INDEX (default /tmp/bench/syn2500k, built if missing), DEBIAN_INDEX, OUT, THREADS, K,
# INTRA (also time each query split over INTRA threads; default 0: off).
set -euo pipefail
cd "$(dirname "$0")/.."
limit=${1:-2000}
out=${OUT:-build/bench/cpu}
bin=build/bin
k=${K:-10,100,1000}
threads=${THREADS:-0}
intra=${INTRA:-0}
syn=${SYN_INDEX:-/tmp/bench/syn2500k}
syn_docs=${SYN_DOCS:-2500000}
debian=${DEBIAN_INDEX:-$out/work/debian}
mkdir -p "$out"
[ -x $bin/gpusearch ] && [ -x $bin/bench_cpu_engine ] || launch/build.sh

if [ ! -f "$syn/manifest.json" ]; then
  echo "== building synthetic index, $syn_docs documents -> $syn"
  $bin/gpusearch -q index --synthetic "docs=$syn_docs,seed=7" --out "$syn" --force
fi
for scoring in bm25 bm25-pr; do
  echo "== synthetic ($syn), $scoring"
  $bin/bench_cpu_engine --index "$syn" --queries "$syn/queries.test.tsv" --limit "$limit" --k "$k" \
    --threads "$threads" --intra-query "$intra" --scoring "$scoring" --out "$out/cpu_synthetic_$scoring.json"
done

if [ -s build/data/debian-descriptions.jsonl ]; then
  if [ ! -f "$debian/manifest.json" ]; then
    echo "== building Debian descriptions index -> $debian"
    $bin/gpusearch -q index --corpus build/data/debian-descriptions.jsonl --out "$debian" --force
  fi
  queries=../shared/data/msmarco-queries-sample/queries.tsv
  for scoring in bm25 bm25-pr; do
    echo "== Debian descriptions, MS MARCO queries, $scoring"
    $bin/bench_cpu_engine --index "$debian" --queries "$queries" --limit "$limit" --k "$k" \
      --threads "$threads" --intra-query "$intra" --scoring "$scoring" --out "$out/cpu_debian_$scoring.json"
  done
else
  echo "== skipping Debian: build/data/debian-descriptions.jsonl missing (launch/test.sh makes it)"
fi
{ grep -m1 "model name" /proc/cpuinfo; nproc; } > "$out/machine.txt"
echo "results in $out"
