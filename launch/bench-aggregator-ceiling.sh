#!/usr/bin/env bash
# The aggregator's ceiling (issue 16): how many queries a second the cluster's own machinery
# (admission: reading, tokenising, term look-up; batching; encode; send; receive; decode; merge;
# the run writer; metrics) can pass with an ISN that costs almost nothing. One ISN runs with
# --probe-memo-answers: after the first pass over the query sample it answers every repeat from
# memory with its engine's own first answer, so the answers stay exact and of their real size
# while the ISN's engine time per batch falls to microseconds. Before and after: the aggregator
# of --before (e.g. main's build) and of --build, with the same ISN binary (--build's), runs
# interleaved; every run file must be the same bytes as the first (CPU engine), or equal to it
# under the exactness contract (gpusearch compare-runs: the GPU engine's float scores differ).
#
#   launch/bench-aggregator-ceiling.sh --out OUT --index DIR --queries FILE [--build DIR]
#       [--before DIR | --before-ref REF] [--batches "64 1024"] [--reps R] [--engine cpu|gpu]
#       [--no-memo] [--taskset CPUS] [--mode M] [--k K] [--extra "FLAGS"]
#
#   --index, --queries  a 1-shard index and a query file with repeats (launch/gpu-host.sh's
#                     real_data: the MS MARCO sample repeated 100 times on the Debian index)
#   --build DIR       this tree's build (bin/gpusearch, bin/gpusearch-aggregator, bin/gpusearch-isn)
#   --before DIR      a build holding an older bin/gpusearch-aggregator (wire-compatible);
#                     default: --before-ref (9b3e838, main before this work) checked out into
#                     OUT/before-src and its aggregator built into OUT/before-build
#   --no-memo         the ISN searches every query (the real engine's time, e.g. the GPU's)
#   --taskset CPUS    run every cluster under taskset -c CPUS
#   --extra FLAGS     more cluster.sh flags for every run (e.g. "--progress spin")
# Prints a table (medians over reps): q/s, the ratio after/before, ms per batch of wall time
# (the aggregator's per-batch cost when the ISN is free), the ISN's engine ms per batch, and the
# metrics' stage means (encode, broadcast, merge wait, decode, merge, aggregator overhead),
# pipeline depth; writes OUT/aggregator-ceiling.json.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out="" build="$root/build" before="" before_ref=9b3e838 index="" queries="" batches="64 1024"
reps=3 engine=cpu memo=1 taskset_cpus="" mode=and-or k=10 extra=""
usage() { sed -n '2,29p' "$0" | sed 's/^# \{0,1\}//'; exit "${1:-2}"; }
while [ $# -gt 0 ]; do
  case "$1" in
    --out) out=$2; shift 2 ;;
    --build) build=$2; shift 2 ;;
    --before) before=$2; shift 2 ;;
    --before-ref) before_ref=$2; shift 2 ;;
    --index) index=$2; shift 2 ;;
    --queries) queries=$2; shift 2 ;;
    --batches) batches=$2; shift 2 ;;
    --reps) reps=$2; shift 2 ;;
    --engine) engine=$2; shift 2 ;;
    --no-memo) memo=0; shift ;;
    --taskset) taskset_cpus=$2; shift 2 ;;
    --mode) mode=$2; shift 2 ;;
    --k) k=$2; shift 2 ;;
    --extra) extra=$2; shift 2 ;;
    -h|--help) usage 0 ;;
    *) echo "bench-aggregator-ceiling: unknown flag $1" >&2; usage 2 ;;
  esac
done
[ -n "$out" ] && [ -n "$index" ] && [ -n "$queries" ] ||
  { echo "bench-aggregator-ceiling: --out, --index and --queries are required" >&2; usage 2; }
mkdir -p "$out/runs"
out=$(cd "$out" && pwd)
build=$(cd "$build" && pwd)
for b in gpusearch gpusearch-aggregator gpusearch-isn; do
  [ -x "$build/bin/$b" ] || { echo "bench-aggregator-ceiling: $build/bin/$b missing (build first)" >&2; exit 2; }
done

# The older aggregator, with this build's ISN beside it (cluster.sh takes both from one bin/).
if [ -z "$before" ]; then
  before=$out/before-build
  if [ ! -x "$before/bin/gpusearch-aggregator" ]; then
    echo "== building the aggregator of $before_ref into $before"
    rm -rf "$out/before-src"
    git -C "$root" worktree add --force --detach "$out/before-src" "$before_ref" >/dev/null
    mapfile -t defs < <(sed -n -E 's/^((CMAKE_BUILD_TYPE|GPUSEARCH_[A-Z_]+|CMAKE_PREFIX_PATH|CMAKE_[A-Z]+_COMPILER|CMAKE_CUDA_ARCHITECTURES|CMAKE_CUDA_HOST_COMPILER|CMAKE_CXX_FLAGS|[A-Za-z0-9_]+_DIR|CAPNP[A-Z_]*)):(STRING|PATH|FILEPATH|BOOL)=(.*)$/-D\1=\5/p' "$build/CMakeCache.txt" | grep -v -- '-DCMAKE_BUILD_TYPE=$' || true)
    cmake -S "$out/before-src" -B "$before" "${defs[@]}" -DGPUSEARCH_CUDA=OFF > "$out/before-cmake.log" 2>&1 ||
      { tail -20 "$out/before-cmake.log"; exit 1; }
    cmake --build "$before" -j"$(nproc)" --target gpusearch-aggregator > "$out/before-build.log" 2>&1 ||
      { tail -30 "$out/before-build.log"; exit 1; }
    git -C "$root" worktree remove --force "$out/before-src" >/dev/null 2>&1 || true
  fi
fi
before=$(cd "$before" && pwd)
mixed=$out/before-bin/bin
mkdir -p "$mixed"
cp -f "$before/bin/gpusearch-aggregator" "$mixed/"
ln -sf "$build/bin/gpusearch-isn" "$mixed/gpusearch-isn"
ln -sf "$build/bin/gpusearch" "$mixed/gpusearch"

flags=(--engine "$engine" --cache-entries 0 --no-verify)
[ "$memo" = 1 ] && flags+=(--probe-memo-answers)
# shellcheck disable=SC2206
flags+=($extra)
pin=(); [ -n "$taskset_cpus" ] && pin=(taskset -c "$taskset_cpus")
echo "== $(wc -l < "$queries") queries, mode $mode, k $k, engine $engine, memo $memo, batches: $batches, $reps rep(s), $(nproc) cores ${taskset_cpus:+(taskset $taskset_cpus)}"
for rep in $(seq 1 "$reps"); do
  for b in $batches; do
    for v in before after; do
      dir=$build; [ $v = before ] && dir=$out/before-bin
      tag=$v-batch$b-rep$rep
      GPUSEARCH_BUILD_DIR=$dir "${pin[@]}" "$root/launch/cluster.sh" -q --index "$index" \
        --queries "$queries" --isns 1 --mode "$mode" --k "$k" --run "$out/runs/$tag.run" \
        --metrics "$out/runs/$tag.json" --batch-size "$b" "${flags[@]}" > "$out/runs/$tag.log" 2>&1 ||
        { tail -20 "$out/runs/$tag.log"; exit 1; }
      ref=$out/runs/before-batch$b-rep1.run
      # Same bytes, else equal under the exactness contract (the GPU engine's float scores and
      # near-tie orders are not byte-identical from run to run), else different.
      if cmp -s "$ref" "$out/runs/$tag.run"; then echo same
      elif "$build/bin/gpusearch" compare-runs "$ref" "$out/runs/$tag.run" > /dev/null 2>&1; then echo equal
      else echo DIFFER; fi > "$out/runs/$tag.answers"
      printf '   %-6s batch %5s rep %s: %s %s\n' $v "$b" "$rep" "$(grep -o '[0-9]* queries/s' "$out/runs/$tag.log" | head -1)" "$(cat "$out/runs/$tag.answers")"
    done
  done
done

python3 - "$out" <<'PY'
import glob, json, os, re, statistics, sys
out = sys.argv[1]
runs = []
for f in sorted(glob.glob(os.path.join(out, "runs", "*.json"))):
    v, b, rep = re.match(r"(\w+)-batch(\d+)-rep(\d+)", os.path.basename(f)[:-5]).groups()
    m = json.load(open(f))
    nb = m["batches"]["count"] or 1
    st = m["stages_ms"]
    isn = m["isn"][0]
    runs.append({"variant": v, "batch": int(b), "rep": int(rep), "qps": m["queries_per_second"],
                 "seconds": m["seconds"], "batches": nb,
                 "wall_ms_per_batch": 1000 * m["seconds"] / nb,
                 "isn_compute_ms_per_batch": 1000 * isn["compute_seconds"] / nb,
                 "stages_mean_ms": {k: v.get("mean") for k, v in st.items()},
                 "depth": (m.get("pipeline_depth") or {}).get("mean"),
                 "isn_encode_ms_per_batch": 1000 * (isn.get("stats") or {}).get("encode_seconds", 0) / nb,
                 "progress": m.get("progress"),
                 "same_bytes": open(f[:-5] + ".answers").read().strip() == "same",
                 "equal": open(f[:-5] + ".answers").read().strip() in ("same", "equal")})
med = lambda xs: statistics.median(xs) if xs else float("nan")
table = []
for b in sorted({r["batch"] for r in runs}):
    row = {"batch": b}
    for v in ("before", "after"):
        rs = [r for r in runs if r["batch"] == b and r["variant"] == v]
        row[v] = {"reps": len(rs), "qps": med([r["qps"] for r in rs]),
                  "wall_ms_per_batch": med([r["wall_ms_per_batch"] for r in rs]),
                  "isn_compute_ms_per_batch": med([r["isn_compute_ms_per_batch"] for r in rs]),
                  "depth": med([r["depth"] for r in rs if r["depth"] is not None]),
                  "stages": {k: med([r["stages_mean_ms"][k] for r in rs if r["stages_mean_ms"].get(k) is not None])
                             for k in ("encode", "broadcast", "merge_wait", "decode", "merge", "aggregator_overhead", "isn_compute_max")},
                  "same_bytes": all(r["same_bytes"] for r in rs),
                  "equal": all(r["equal"] for r in rs)}
    row["after_over_before_qps"] = row["after"]["qps"] / row["before"]["qps"] if row["before"]["qps"] else None
    row["after_over_before_per_batch"] = row["after"]["wall_ms_per_batch"] / row["before"]["wall_ms_per_batch"]
    table.append(row)
json.dump({"table": table, "runs": runs}, open(os.path.join(out, "aggregator-ceiling.json"), "w"), indent=1)
fmt = "%6s %-7s %9s %7s %8s %8s %7s %7s %7s %7s %7s %7s %6s %s"
print()
print(fmt % ("batch", "variant", "q/s", "ratio", "ms/b", "isn ms/b", "encode", "bcast", "mwait", "decode", "merge", "agg-ovh", "depth", "answers"))
for row in table:
    for v in ("before", "after"):
        x = row[v]; s = x["stages"]
        f = lambda y, p=3: "-" if y is None or y != y else "%.*f" % (p, y)
        print(fmt % (row["batch"], v, f(x["qps"], 0), f(row["after_over_before_qps"], 2) + "x" if v == "after" else "", f(x["wall_ms_per_batch"]),
                     f(x["isn_compute_ms_per_batch"]), f(s["encode"]), f(s["broadcast"]), f(s["merge_wait"]), f(s["decode"]), f(s["merge"]),
                     f(s["aggregator_overhead"]), f(x["depth"], 1),
                     "same bytes" if x["same_bytes"] else "equal" if x["equal"] else "DIFFER"))
print("medians over reps; ms/b = wall time per batch (the aggregator's per-batch cost when the ISN is free);")
print("isn ms/b = the ISN engine's time per batch; stage columns: the metrics' stages_ms means (ms per batch).")
print("wrote", os.path.join(out, "aggregator-ceiling.json"))
PY
