#!/usr/bin/env bash
# Cluster benchmark: the aggregator and 1, 2, 4 ISNs (mpirun, launch/cluster.sh) on a 2.5M-document
# synthetic collection, at several batch sizes; collects every run's metrics into one JSON and
# plots throughput and p99 latency (launch/plot-cluster.py).
# Environment (defaults): BENCH_INDEX (/tmp/bench/syn2500k: built if missing, ~3.5 min),
# BENCH_QUERIES (2000: the first N test queries), BENCH_ISNS ("1 2 4"), BENCH_BATCHES
# ("8 32 128 512"), BENCH_MODE (and-or), BENCH_K (10), BENCH_ENGINE (reference),
# BENCH_OUT (tests/benchmarks/cluster: the combined JSON and the plot), BENCH_RUNS
# (build/bench-cluster: every run's run file, metrics and log), BENCH_EXTRA (more cluster.sh flags).
set -euo pipefail
cd "$(dirname "$0")/.."
index=${BENCH_INDEX:-/tmp/bench/syn2500k}
nq=${BENCH_QUERIES:-2000}
isn_counts=${BENCH_ISNS:-"1 2 4"}
batches=${BENCH_BATCHES:-"8 32 128 512"}
mode=${BENCH_MODE:-and-or}
k=${BENCH_K:-10}
engine=${BENCH_ENGINE:-reference}
out=${BENCH_OUT:-tests/benchmarks/cluster}
runs=${BENCH_RUNS:-build/bench-cluster}
bin=build/bin/gpusearch
[ -x $bin ] && [ -x build/bin/gpusearch-aggregator ] && [ -x build/bin/gpusearch-isn ] || launch/build.sh
mkdir -p "$runs" "$out"
if [ ! -f "$index/manifest.json" ]; then
  echo "== building $index (2.5M synthetic documents)"
  $bin index --synthetic docs=2500000,seed=7 --out "$index"
fi
index_of() {  # the index with N shards: the base one (1 shard) or a re-sharded copy
  if [ "$1" = 1 ]; then echo "$index"; return; fi
  local d="$index-s$1"
  [ -f "$d/manifest.json" ] || $bin -q partition --index "$index" --out "$d" --shards "$1" --force >&2
  echo "$d"
}
head -"$nq" "$index/queries.test.tsv" > "$runs/queries.tsv"
echo "== $nq queries, mode $mode, k $k, engine $engine, ISNs: $isn_counts, batch sizes: $batches"
printf '%5s %6s %10s %9s %9s %9s  %s\n' isns batch "queries/s" "p50 ms" "p99 ms" "max ms" "answers"
first=""
for n in $isn_counts; do
  idx=$(index_of "$n")
  for b in $batches; do
    tag="isns$n-batch$b"
    # shellcheck disable=SC2086
    launch/cluster.sh --index "$idx" --queries "$runs/queries.tsv" --isns "$n" --mode "$mode" \
      --k "$k" --run "$runs/$tag.run" --metrics "$runs/$tag.json" --engine "$engine" \
      --batch-size "$b" --max-in-flight 2 --cache-entries 0 --no-verify -q ${BENCH_EXTRA:-} \
      > "$runs/$tag.log" 2>&1 || { tail -20 "$runs/$tag.log"; exit 1; }
    # Correctness column: every run must equal the sweep's first run (ISN count and batch size
    # never change an answer).
    [ -n "$first" ] || first="$runs/$tag.run"
    if $bin compare-runs "$first" "$runs/$tag.run" > "$runs/$tag.check" 2>&1; then
      check=equal
    else
      check=DIFFER
    fi
    python3 - "$runs/$tag.json" "$n" "$b" "$check" <<'PY'
import json, sys
m = json.load(open(sys.argv[1])); l = m["latency_ms"]
m["answers_equal_first_run"] = sys.argv[4] == "equal"
json.dump(m, open(sys.argv[1], "w"), indent=2)
print("%5s %6s %10.1f %9.1f %9.1f %9.1f  %s" % (sys.argv[2], sys.argv[3], m["queries_per_second"], l["p50"], l["p99"], l["max"], sys.argv[4]))
PY
  done
done
python3 - "$out" "$runs" <<'PY'
import glob, json, os, platform, sys
out, rundir = sys.argv[1], sys.argv[2]
runs = []
for f in sorted(glob.glob(os.path.join(rundir, "isns*-batch*.json"))):
    m = json.load(open(f))
    runs.append({"isns": m["isns"], "batch_size": m["batch_policy"]["batch_size"],
                 "queries_per_second": m["queries_per_second"], "latency_ms": m["latency_ms"],
                 "stages_ms": m["stages_ms"],
                 "answers_equal_first_run": m.get("answers_equal_first_run"), "metrics": m})
cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
json.dump({"machine": {"cpu": cpu, "cores": os.cpu_count(),
                       "memory_gib": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1),
                       "host": platform.node()},
           "runs": runs}, open(os.path.join(out, "bench-cluster.json"), "w"), indent=1)
print("wrote", os.path.join(out, "bench-cluster.json"))
PY
/usr/bin/python3 launch/plot-cluster.py "$out/bench-cluster.json" "$out/bench-cluster.png"
