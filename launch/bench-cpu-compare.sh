#!/usr/bin/env bash
# Before/after benchmark of the CPU engine (issue 17): bench_cpu_engine of an earlier build
# (BEFORE_BIN) and of this one (AFTER_BIN), alternating ROUNDS times so that load from other
# processes hits both alike, on the synthetic index and on the Debian package descriptions with
# the MS MARCO query sample, for each scoring; then a markdown comparison
# (launch/cpu_bench_compare.py: per algorithm and k, latency mean / p50 / p99 and work counters
# before and after, and the best algorithm before against the best after).
#   BEFORE_BIN=/path/to/old/bin launch/bench-cpu-compare.sh
# Env: BEFORE_BIN (a directory holding the earlier bench_cpu_engine; required), AFTER_BIN
# (build/bin), SYN_INDEX (/tmp/bench/syn2500k; built with AFTER_BIN's gpusearch if missing,
# SYN_DOCS documents, 2500000), DEBIAN_INDEX (OUT/work/debian; built from DEBIAN_CORPUS,
# build/data/debian-descriptions.jsonl, if missing), QUERIES (the MS MARCO sample), OUT
# (build/bench/cpu-compare), K (10,1000), LIMIT (2000 queries), ROUNDS (3), THREADS (throughput
# threads, 0: all cores), SCORINGS ("bm25 bm25-pr"), BEFORE_ALGORITHMS / AFTER_ALGORITHMS,
# COLLECTIONS ("synthetic debian"), PIN (a core for taskset, e.g. 1; empty: no pinning),
# DEBIAN_REPEAT (5: times the Debian query sample is replayed, within LIMIT).
set -euo pipefail
cd "$(dirname "$0")/.."
: "${BEFORE_BIN:?BEFORE_BIN must name a directory holding the earlier bench_cpu_engine}"
after=${AFTER_BIN:-build/bin}
out=${OUT:-build/bench/cpu-compare}
k=${K:-10,1000}
limit=${LIMIT:-2000}
rounds=${ROUNDS:-3}
threads=${THREADS:-0}
syn=${SYN_INDEX:-/tmp/bench/syn2500k}
debian=${DEBIAN_INDEX:-$out/work/debian}
corpus=${DEBIAN_CORPUS:-build/data/debian-descriptions.jsonl}
queries=${QUERIES:-../shared/data/msmarco-queries-sample/queries.tsv}
before_algorithms=${BEFORE_ALGORITHMS:-exhaustive,wand,bmw,maxscore}
after_algorithms=${AFTER_ALGORITHMS:-exhaustive,wand,bmw,maxscore,maxscore-daat}
pin=()
[[ -n ${PIN:-} ]] && pin=(taskset -c "$PIN")
mkdir -p "$out"
for b in "$BEFORE_BIN/bench_cpu_engine" "$after/bench_cpu_engine"; do
  [[ -x $b ]] || { echo "bench-cpu-compare.sh: $b not found" >&2; exit 1; }
done

run_collection() {  # name index queries
  local name=$1 index=$2 qfile=$3 scoring round side bin algorithms
  for scoring in ${SCORINGS:-bm25 bm25-pr}; do
    for round in $(seq 1 "$rounds"); do
      for side in before after; do
        if [[ $side == before ]]; then bin=$BEFORE_BIN algorithms=$before_algorithms
        else bin=$after algorithms=$after_algorithms; fi
        "${pin[@]}" "$bin/bench_cpu_engine" --index "$index" --queries "$qfile" --k "$k" \
          --limit "$limit" --threads "$threads" --scoring "$scoring" --algorithms "$algorithms" \
          --out "$out/cpu_${name}_${scoring}_${side}_r${round}.json" \
          > "$out/cpu_${name}_${scoring}_${side}_r${round}.log" 2>&1 \
          || { tail -5 "$out/cpu_${name}_${scoring}_${side}_r${round}.log"; return 1; }
      done
      echo "$name $scoring round $round done"
    done
  done
}

for collection in ${COLLECTIONS:-synthetic debian}; do
  case $collection in
    synthetic)
      if [[ ! -f $syn/manifest.json ]]; then
        echo "== building synthetic index, ${SYN_DOCS:-2500000} documents -> $syn"
        "$after/gpusearch" -q index --synthetic "docs=${SYN_DOCS:-2500000},seed=7" --out "$syn" --force
      fi
      run_collection synthetic "$syn" "$syn/queries.test.tsv"
      ;;
    debian)
      if [[ ! -f $debian/manifest.json ]]; then
        [[ -s $corpus ]] || { echo "== skipping Debian: $corpus missing"; continue; }
        "$after/gpusearch" -q index --corpus "$corpus" --out "$debian" --force
      fi
      # The MS MARCO sample is 386 queries: a round of it lasted about a second on 16 cores and
      # its k = 1000 ratio moved 2.48x -> 1.88x between two runs of the same binaries. Each query
      # is replayed DEBIAN_REPEAT times (default 5, ids suffixed -r1..-rN) for steadier means.
      reps=${DEBIAN_REPEAT:-5}
      dq=$out/work/debian-queries-x$reps.tsv
      mkdir -p "$out/work"
      for r in $(seq 1 "$reps"); do
        awk -F'\t' -v r="$r" 'BEGIN { OFS = "\t" } NF >= 2 { $1 = $1 "-r" r; print }' "$queries"
      done > "$dq"
      run_collection debian "$debian" "$dq"
      ;;
    *) echo "bench-cpu-compare.sh: unknown collection '$collection'" >&2; exit 2 ;;
  esac
done
{ grep -m1 "model name" /proc/cpuinfo; nproc; } > "$out/machine.txt"
python3 launch/cpu_bench_compare.py "$out" | tee "$out/compare.md"
