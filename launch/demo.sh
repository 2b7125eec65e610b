#!/usr/bin/env bash
# The main job on a built-in default: generate a synthetic GOV2-like collection in 2 shards, run
# the cluster on it (mpirun: the aggregator and 2 ISNs, one per shard) to answer its test
# queries, check the answers against the in-process reference engine, and print a summary.
#   launch/demo.sh                 the cluster (default)
#   launch/demo.sh --in-process    the in-process search only (no MPI)
# Environment: DEMO_DOCS (default 20000), DEMO_DIR (default build/demo).
set -euo pipefail
cd "$(dirname "$0")/.."
in_process=0
for a in "$@"; do
  case "$a" in
    --in-process) in_process=1 ;;
    -h|--help) sed -n '2,8p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "demo.sh: unknown argument $a" >&2; exit 2 ;;
  esac
done
launch/install-deps.sh
launch/build.sh
docs=${DEMO_DOCS:-20000}
dir=${DEMO_DIR:-build/demo}
bin=build/bin/gpusearch
rm -rf "$dir"
mkdir -p "$dir"
echo "== index a synthetic collection of $docs documents (2 shards)"
$bin index --synthetic "docs=$docs,seed=7,train_queries=2000,test_queries=2000" --shards 2 \
  --out "$dir/index" --report "$dir/build.json"
echo "== search its test queries in process (reference engine, and-or, k=10, bm25)"
$bin search --engine reference --index "$dir/index" --queries "$dir/index/queries.test.tsv" --mode and-or --k 10 \
  --run "$dir/run.txt" --metrics "$dir/metrics.json"
if [ "$in_process" = 1 ]; then
  echo "== first results"
  head -5 "$dir/run.txt"
  exit 0
fi
echo "== the cluster: aggregator + 2 ISNs under mpirun (and-or, k=10, batches of 64, 2 in flight, result cache)"
launch/cluster.sh --index "$dir/index" --queries "$dir/index/queries.test.tsv" --isns 2 \
  --mode and-or --k 10 --run "$dir/cluster-run.txt" --metrics "$dir/cluster-metrics.json" \
  --batch-size 64 --max-in-flight 2 --cache-entries 10000 -q
echo "== the cluster's answers against the in-process reference"
$bin compare-runs "$dir/run.txt" "$dir/cluster-run.txt"
python3 - "$dir/cluster-metrics.json" <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))
s = m["stages_ms"]
print("== cluster metrics ({}):".format(sys.argv[1]))
print("  {} queries in {:.2f} s = {:.0f} q/s; latency ms p50 {:.2f} p95 {:.2f} p99 {:.2f} max {:.2f}".format(
    m["queries"]["run"], m["seconds"], m["queries_per_second"], m["latency_ms"]["p50"],
    m["latency_ms"]["p95"], m["latency_ms"]["p99"], m["latency_ms"]["max"]))
print("  {} batches, mean size {:.1f}; cache hits {}; partial answers {}".format(
    m["batches"]["count"], m["batches"]["size"]["mean"], m["queries"]["cache_hits"], m["queries"]["partial"]))
print("  per batch, mean ms: batching wait {:.2f} (per query), broadcast {:.3f}, ISN compute {:.2f}, "
      "gather overhead {:.2f}, merge {:.3f}".format(
    s["batching_wait_per_query"]["mean"], s["broadcast"]["mean"], s["isn_compute_max"]["mean"],
    s["gather_overhead"]["mean"], s["merge"]["mean"]))
for i in m["isn"]:
    h = i["hello"]
    print("  ISN rank {}: shard {}, {} docs, {:.1f} MiB mapped, {} batches, {:.2f} s compute, engine {}".format(
        i["rank"], h["shard"], h["docs"], h["mapped_bytes"] / 2**20, i["batches_answered"],
        i["compute_seconds"], i["stats"].get("engine", "?")))
PY
echo "== first results"
head -5 "$dir/cluster-run.txt"
