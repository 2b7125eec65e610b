#!/usr/bin/env bash
# The cluster-wide ranker cache (issue 12): a Zipf mix over a store of many rankers with a ranker
# cache that holds a fraction of them, run on the cluster under --ranker-cache-policy coordinated
# (the aggregator's plans and grouping by ranker) and per-isn-lru (each ISN's own LRU); both runs
# are checked against `gpusearch search` with the same flags (a wrong answer fails the benchmark).
# Writes OUT/ranker-cache-ISNSisns.json (one entry per policy: hit rate, loads, evictions, load
# time and bytes, commands, throughput, latency) and prints a table.
#
#   launch/bench-ranker-cache.sh [--out DIR] [--isns N] [--queries Q] [--rankers R]
#                                [--cache-rankers C] [--zipf S] [--batch-size B] [--window W]
#                                [--candidates N] [--docs D] [--engine E] [--repeats K]
#
# Defaults: tests/benchmarks/results/ranker, 2 ISNs, 2000 queries, 200 rankers, a cache of 20
# (20 x the store's mean ranker size), Zipf exponent 1.0, batches of 32, a window of 256 queries
# admitted ahead (both policies), 100 candidates per shard, 20000 synthetic documents, the cpu
# engine, 3 repeats (the median run by throughput is kept). Work files go to build/bench-ranker.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${GPUSEARCH_BUILD_DIR:-$root/build}
out=$root/tests/benchmarks/results/ranker
isns=2 nq=2000 rankers=200 cache_rankers=20 zipf=1.0 batch=32 window=256 candidates=100
docs=20000 engine=cpu repeats=3
while [ $# -gt 0 ]; do
  case "$1" in
    --out) out=$2; shift 2 ;;
    --isns) isns=$2; shift 2 ;;
    --queries) nq=$2; shift 2 ;;
    --rankers) rankers=$2; shift 2 ;;
    --cache-rankers) cache_rankers=$2; shift 2 ;;
    --zipf) zipf=$2; shift 2 ;;
    --batch-size) batch=$2; shift 2 ;;
    --window) window=$2; shift 2 ;;
    --candidates) candidates=$2; shift 2 ;;
    --docs) docs=$2; shift 2 ;;
    --engine) engine=$2; shift 2 ;;
    --repeats) repeats=$2; shift 2 ;;
    -h|--help) sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "bench-ranker-cache.sh: unknown flag $1" >&2; exit 2 ;;
  esac
done
gs=$build/bin/gpusearch
[ -x "$gs" ] && [ -x "$build/bin/gpusearch-aggregator" ] && [ -x "$build/bin/gpusearch-isn" ] || {
  echo "bench-ranker-cache.sh: build first (cmake --build $build)" >&2; exit 2; }
work=$root/build/bench-ranker
mkdir -p "$work" "$out"
export GPUSEARCH_BUILD_DIR=$build

index=$work/idx-$docs-s$isns
if [ ! -f "$index/manifest.json" ]; then
  echo "== index: $docs synthetic documents, $isns shards, forward index"
  "$gs" -q index --synthetic "docs=$docs,seed=7,train_queries=5,test_queries=$nq,mean_length=150" \
    --shards "$isns" --out "$index" --forward-index >/dev/null
fi
store=$work/store-$rankers
if [ ! -f "$store/store.json" ]; then
  echo "== store: $rankers rankers"
  "$gs" ranker-store generate --store "$store" --mix "$rankers" --seed 9 >/dev/null
fi
head -"$nq" "$index/queries.test.tsv" > "$work/queries.tsv"
# A cache that holds `cache_rankers` rankers of the store's mean size.
cache_mb=$(python3 -c 'import json,sys
r=json.load(open(sys.argv[1]))["rankers"]
print(sum(x["bytes"] for x in r) / len(r) * int(sys.argv[2]) / 1048576)' "$store/store.json" "$cache_rankers")
flags=(--ranker-store "$store" --ranker-mix "$zipf" --candidates "$candidates" --ranker-cache-mb "$cache_mb")

echo "== reference: gpusearch search"
"$gs" -q search --index "$index" --queries "$work/queries.tsv" "${flags[@]}" --engine "$engine" \
  --run "$work/ref.txt" >/dev/null

for policy in coordinated per-isn-lru; do
  for r in $(seq 1 "$repeats"); do
    echo "== $policy, run $r"
    "$root/launch/cluster.sh" -q --index "$index" --queries "$work/queries.tsv" --isns "$isns" \
      --run "$work/run-$policy-$r.txt" --metrics "$work/m-$policy-$r.json" --engine "$engine" \
      "${flags[@]}" --ranker-cache-policy "$policy" --batch-size "$batch" --window "$window" \
      > "$work/log-$policy-$r.txt" 2>&1 || { tail -20 "$work/log-$policy-$r.txt"; exit 1; }
    "$gs" compare-runs "$work/ref.txt" "$work/run-$policy-$r.txt" >/dev/null ||
      { echo "bench-ranker-cache.sh: $policy run $r differs from gpusearch search" >&2; exit 1; }
  done
done

result=$out/ranker-cache-${isns}isns.json
python3 - "$work" "$repeats" "$result" <<EOF
import json, platform, os, subprocess, sys, statistics
work, repeats, result = sys.argv[1], int(sys.argv[2]), sys.argv[3]
def cpu():
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"): return line.split(":", 1)[1].strip()
    except OSError: pass
    return platform.processor()
entries = {}
for policy in ["coordinated", "per-isn-lru"]:
    runs = [json.load(open(f"{work}/m-{policy}-{r}.json")) for r in range(1, repeats + 1)]
    runs.sort(key=lambda m: m["queries_per_second"])
    m = runs[len(runs) // 2]  # the median run by throughput
    rc = m["second_stage"]["ranker_cache"]
    t = rc["total"]
    entries[policy] = {
        "queries": m["queries"]["run"], "exact": True,
        "queries_per_second": m["queries_per_second"],
        "queries_per_second_runs": [x["queries_per_second"] for x in runs],
        "latency_ms": m["latency_ms"], "batches": m["batches"]["count"],
        "hit_rate": t["hit_rate"], "requests": t["requests"], "hits": t["hits"],
        "loads": t["loads"], "evictions": t["evictions"], "load_bytes": t["load_bytes"],
        "load_seconds": t["load_seconds"], "unplanned_loads": t["unplanned_loads"],
        "unplanned_evictions": t["unplanned_evictions"],
        "control_messages": rc["control_messages"], "control_bytes": rc["control_bytes"],
        "per_isn": [{"rank": i["rank"], "hit_rate": (i["cache"] or {}).get("hit_rate"),
                     "loads": (i["cache"] or {}).get("loads"),
                     "evictions": (i["cache"] or {}).get("evictions"),
                     "load_seconds": (i["cache"] or {}).get("load_seconds"),
                     "rank_ms": i.get("rank_ms")} for i in rc["isns"]],
        "coordinator": rc["coordinator"],
    }
first = json.load(open(f"{work}/m-coordinated-1.json"))
ss = first["second_stage"]
doc = {"benchmark": "ranker-cache", "machine": {"cpu": cpu(), "cores": os.cpu_count(),
                                                 "host": platform.node()},
       "commit": subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                                text=True).stdout.strip(),
       "isns": first["isns"], "engine": first["engine"], "rankers_in_store": ss["rankers_in_store"],
       "zipf_exponent": ss["ranker_mix_exponent"], "candidates": ss["candidates"],
       "cache_budget_bytes": ss["ranker_cache"]["budget_bytes"],
       "batch_size": first["batch_policy"]["batch_size"], "window": first["batch_policy"]["window"],
       "repeats": repeats, "policies": entries}
json.dump(doc, open(result, "w"), indent=1)
print(f"{'policy':13} {'hit rate':>8} {'loads':>6} {'evict':>6} {'load s':>7} {'MB loaded':>9} {'cmds':>5} {'q/s':>7} {'p50 ms':>7} {'p99 ms':>7}")
for p, e in entries.items():
    print(f"{p:13} {e['hit_rate']:8.3f} {e['loads']:6d} {e['evictions']:6d} {e['load_seconds']:7.2f} "
          f"{e['load_bytes']/1048576:9.1f} {e['control_messages']:5d} {e['queries_per_second']:7.1f} "
          f"{e['latency_ms']['p50']:7.1f} {e['latency_ms']['p99']:7.1f}")
print("written to", result)
EOF
