#!/usr/bin/env bash
# Several GPUs per ISN and per node (issue 15), in one command on a multi-GPU host (the device
# tool's nvidia-h200-x2/-x4/-x8): every row's run compared with the CPU engine's on the same
# index and queries (the exactness rule), results written to OUT as they come, so that a run cut
# short by a call's time limit goes on where it stopped when called again with the same OUT.
#
#   launch/multi-gpu-runs.sh --out DIR [--phases "per-isn per-node weak"] [--gpus "1 2 4"]
#       [--docs "2500000 10000000"] [--docs-per-gpu 2500000] [--batches "1024 4096"]
#       [--ks "10 1000"] [--rates "0"] [--queries 10000] [--mode and-or] [--engine gpu]
#       [--splits "ranges queries"] [--cluster-flags "WORDS"] [--index-root DIR]
#       [--summarize-only]
#
# Phases (each row: the cluster under launch/cluster.sh, closed loop unless a rate is given):
#   per-isn   one ISN with G GPUs (--gpus-per-isn G; G = 1 is the plain GPU engine) on each
#             --docs index, each batch size and k: throughput, p99, and the NCCL merge's share
#             of the ISN's batch time (stats.multi_gpu: merge over ranges + merge)
#   per-node  vertical against horizontal inside the node: one ISN with G GPUs against G ISNs
#             with one GPU each (the index split in G docID ranges), the first --docs index,
#             batch 1,024, k 10, at each --rates arrival rate (0: closed loop; R: --qps R)
#   weak      a fixed partition per GPU: one ISN with G GPUs on G x --docs-per-gpu documents,
#             batch 1,024, k 10
# G takes the --gpus values up to the host's GPU count (nvidia-smi -L); with --engine cpu (a
# smoke test of this script without a GPU) only G = 1 runs per ISN. Every row of one ISN over
# G > 1 GPUs runs once per --splits value (gpusearch-isn --gpu-split; default ranges: the docID
# ranges merged through NCCL; queries: each GPU a share of the batch's queries, its row named
# ...-queries).
#
# --cluster-flags WORDS go to launch/cluster.sh in every row this call runs (e.g. "--admission
# window": batches queued at the ISNs, which measures what the GPUs can do rather than the
# closed loop's round trip; rows are kept by name, so give such a call its own --out).
#
# OUT/multi-gpu.json: machine (gpus, their names, cores, NCCL's version and first topology lines
# from NCCL_DEBUG=INFO), one row per run (phase, docs, isns, gpus_per_isn, gpus, batch, k, rate,
# q/s, p50/p99 ms, merge share, the slowest ISN's compute per batch and the share of its batches'
# span its engine was busy, cluster flags, exact), and weak_scaling: per G, q/s and
# weak_scaling_efficiency = (q/s with G GPUs x documents) / (G x q/s with one GPU x its
# documents), the documents searched per second against G times one GPU's (issue 15's goal:
# >= 0.9 at 4 GPUs), and weak_scaling_efficiency_compute, the same from the ISN's compute per
# batch instead of the run's q/s (the GPUs' own scaling, without the time the ISN waited for the
# aggregator between batches). Also OUT/multi-gpu.md, the tables. NCCL_NVLS_ENABLE=0 on every run.
# Binaries: GPUSEARCH_BUILD_DIR (default build/; a device call sources launch/device-env.sh,
# which sets GPUSEARCH_BIN: its parent is used).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out="" phases="per-isn per-node weak" gpus_wanted="1 2 4" docs_list="2500000 10000000"
docs_per_gpu=2500000 batches="1024 4096" ks="10 1000" rates="0" nq=10000 mode=and-or
engine=gpu index_root="" summarize_only=0 splits="ranges" cluster_flags=""
usage() { awk 'NR > 1 && !/^#/ { exit } NR > 1' "$0" | sed 's/^# \{0,1\}//'; exit "${1:-2}"; }
while [ $# -gt 0 ]; do
  case "$1" in
    --out) out=$2; shift 2 ;;
    --phases) phases=$2; shift 2 ;;
    --gpus) gpus_wanted=$2; shift 2 ;;
    --docs) docs_list=$2; shift 2 ;;
    --docs-per-gpu) docs_per_gpu=$2; shift 2 ;;
    --batches) batches=$2; shift 2 ;;
    --ks) ks=$2; shift 2 ;;
    --rates) rates=$2; shift 2 ;;
    --queries) nq=$2; shift 2 ;;
    --mode) mode=$2; shift 2 ;;
    --engine) engine=$2; shift 2 ;;
    --splits) splits=$2; shift 2 ;;
    --cluster-flags) cluster_flags=$2; shift 2 ;;
    --index-root) index_root=$2; shift 2 ;;
    --summarize-only) summarize_only=1; shift ;;
    -h|--help) usage 0 ;;
    *) echo "multi-gpu-runs: unknown argument '$1'" >&2; usage 2 ;;
  esac
done
[ -n "$out" ] || { echo "multi-gpu-runs: --out DIR is required" >&2; usage 2; }
for p in $phases; do
  case "$p" in per-isn|per-node|weak) ;; *)
    echo "multi-gpu-runs: unknown phase '$p' (per-isn, per-node, weak)" >&2; exit 2 ;;
  esac
done
case "$engine" in gpu|cpu) ;; *) echo "multi-gpu-runs: --engine gpu or cpu" >&2; exit 2 ;; esac
for sp in $splits; do
  case "$sp" in ranges|queries) ;; *)
    echo "multi-gpu-runs: unknown split '$sp' (ranges, queries)" >&2; exit 2 ;;
  esac
done
for n in $gpus_wanted $docs_list $docs_per_gpu $batches $ks $rates $nq; do
  [[ $n =~ ^[0-9]+$ ]] || { echo "multi-gpu-runs: '$n' is not a whole number" >&2; exit 2; }
done
mkdir -p "$out/runs"
out=$(cd "$out" && pwd)
index_root=${index_root:-$out/indexes}
mkdir -p "$index_root"
if [ -n "${GPUSEARCH_BUILD_DIR:-}" ]; then build=$GPUSEARCH_BUILD_DIR
elif [ -n "${GPUSEARCH_BIN:-}" ]; then build=$(cd "$GPUSEARCH_BIN/.." && pwd)
else build=$root/build; fi
export GPUSEARCH_BUILD_DIR=$build
gs=$build/bin/gpusearch
[ -x "$gs" ] || { echo "multi-gpu-runs: no $gs (GPUSEARCH_BUILD_DIR)" >&2; exit 2; }
export NCCL_NVLS_ENABLE=0
t0=$(date +%s)
log() { echo "[$(( $(date +%s) - t0 )) s] $*"; }

host_gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
host_gpus=${host_gpus:-0}
# The record of the machine that ran the rows: a --summarize-only call (perhaps on another
# machine) keeps it.
if [ "$summarize_only" = 0 ] || [ ! -f "$out/machine.txt" ]; then
  {
    echo "cores $(nproc)"
    echo "gpus $host_gpus"
    nvidia-smi -L 2>/dev/null || echo "no nvidia-smi"
    nvidia-smi topo -m 2>/dev/null || true
  } > "$out/machine.txt"
fi
gpu_counts() {  # the wanted G values this host (and engine) can run
  local g
  for g in $gpus_wanted; do
    [ "$g" -ge 1 ] || continue
    if [ "$engine" = cpu ]; then [ "$g" = 1 ] && echo 1; continue; fi
    [ "$g" -le "$host_gpus" ] && echo "$g"
  done
  return 0
}

index_for() {  # the synthetic index of $1 documents (seed 7), built once
  local d=$index_root/synth-$1
  if [ ! -f "$d/manifest.json" ]; then
    log "indexing $1 synthetic documents into $d" >&2
    "$gs" -q index --synthetic "docs=$1,seed=7,test_queries=$(( nq > 10000 ? nq : 10000 ))" \
      --out "$d" > "$d.log" 2>&1 || { echo "multi-gpu-runs: indexing failed ($d.log)" >&2; return 1; }
  fi
  echo "$d"
}
split_for() {  # $1 split into $2 docID ranges (one shard per ISN)
  local d=$1-s$2
  [ -f "$d/manifest.json" ] ||
    "$gs" -q partition --index "$1" --out "$d" --shards "$2" --force > "$d.log" 2>&1 ||
    { echo "multi-gpu-runs: partition failed ($d.log)" >&2; return 1; }
  echo "$d"
}
queries_for() {  # the first --queries test queries of index $1
  local q=$1/queries-$nq.tsv
  [ -f "$q" ] || head -"$nq" "$1/queries.test.tsv" > "$q"
  echo "$q"
}
reference_for() {  # the CPU engine's run on index $1 at k $2 (in process, every core)
  local r=$1/reference-$mode-k$2-q$nq.run
  [ -f "$r" ] ||
    "$gs" -q search --engine cpu --index "$1" --queries "$(queries_for "$1")" --mode "$mode" \
      --k "$2" --run "$r" > "$r.log" 2>&1 || { echo "multi-gpu-runs: reference run failed ($r.log)" >&2; return 1; }
  echo "$r"
}

splits_for() {  # the --splits values a row of one ISN over $1 GPUs runs (one GPU: one row)
  if [ "$1" -gt 1 ]; then echo "$splits"; else echo ranges; fi
}
suffix() { [ "$1" = queries ] && echo "-queries"; return 0; }  # row names: ranges keep the old ones

nccl_logged=0
# One row: run_row NAME PHASE DOCS WHOLE INDEX ISNS GPUS_PER_ISN BATCH K RATE [SPLIT] (WHOLE: the
# one-shard index whose queries and CPU reference run the row uses; INDEX: it or a split of it;
# SPLIT: --gpu-split, for G > 1)
run_row() {
  local name=$1 phase=$2 docs=$3 whole=$4 idx=$5 isns=$6 g=$7 batch=$8 k=$9 rate=${10}
  local split=${11:-ranges}
  [ "$g" -gt 1 ] || split=ranges  # one GPU: nothing to split
  local run=$out/runs/$name.run metrics=$out/runs/$name.json rowf=$out/runs/$name.row.json
  if [ -f "$rowf" ]; then log "$name: done before"; return 0; fi
  local ref q
  ref=$(reference_for "$whole" "$k") || return 1
  q=$(queries_for "$whole")
  local extra=(--engine "$engine" --batch-size "$batch")
  [ "$rate" -gt 0 ] && extra+=(--qps "$rate")
  [ "$split" = queries ] && extra+=(--gpu-split queries)
  local more=()
  read -r -a more <<< "$cluster_flags"
  extra+=("${more[@]}")
  local envs=()
  if [ "$nccl_logged" = 0 ] && [ "$g" -gt 1 ]; then envs=(NCCL_DEBUG=INFO); nccl_logged=1; fi
  log "$name: $isns ISN(s) x $g GPU(s) (split $split), $docs documents, batch $batch, k $k, rate $rate"
  local rc=0
  env "${envs[@]}" "$root/launch/cluster.sh" --index "$idx" --queries "$q" --isns "$isns" \
    --gpus-per-isn "$g" --mode "$mode" --k "$k" --run "$run" --metrics "$metrics" "${extra[@]}" \
    > "$out/runs/$name.log" 2>&1 || rc=$?
  if [ "${#envs[@]}" -gt 0 ]; then
    grep -m 20 -E "NCCL INFO (NCCL version|Channel|Ring|Trees|comm )" "$out/runs/$name.log" \
      > "$out/nccl-info.txt" || true
  fi
  local cmp="not run (cluster exit $rc)"
  if [ "$rc" = 0 ]; then
    # Every difference (the first few, by query) kept beside the row; its last line in the row.
    "$gs" compare-runs "$ref" "$run" > "$out/runs/$name.compare.txt" 2>&1 || true
    cmp=$(tail -1 "$out/runs/$name.compare.txt")
  fi
  python3 - "$metrics" "$rowf" "$cmp" "$rc" "$cluster_flags" <<EOF
import json, os, sys
metrics, rowf, cmp, rc, cluster_flags = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5]
row = {"name": "$name", "phase": "$phase", "docs": $docs, "isns": $isns, "gpus_per_isn": $g,
       "split": "$split",
       "gpus": $isns * $g, "batch": $batch, "k": $k, "rate": $rate, "mode": "$mode",
       "engine": "$engine", "cluster_flags": cluster_flags, "exit": rc, "compare": cmp,
       "exact": rc == 0 and cmp.startswith("runs equal")}
if rc == 0 and os.path.exists(metrics):
    m = json.load(open(metrics))
    row["queries_per_second"] = m.get("queries_per_second")
    lat = m.get("latency_ms", {})
    row["p50_ms"], row["p99_ms"] = lat.get("p50"), lat.get("p99")
    ranges = merge = 0.0
    for i in m.get("isn", []):
        mg = i.get("stats", {}).get("multi_gpu")
        if mg:
            ranges += mg.get("range_seconds", 0.0)
            merge += mg.get("merge_seconds", 0.0)
    if ranges + merge > 0:
        row["merge_share"] = merge / (ranges + merge)
        row["merge_seconds"], row["range_seconds"] = merge, ranges
    # The slowest ISN's engine time per batch, and the busiest ISN's share of its batches' span
    # spent computing (from the timeline: its batches' spans joined, since batches joined into
    # one engine call share theirs, over its first batch's start to its last one's end; the
    # ISN's idle_seconds would count its start-up too). Where that share is low, the row's q/s
    # is the closed loop's round trip, not the GPUs'.
    per_isn = [(i["stats"]["compute_seconds"], i["stats"]["batches"])
               for i in m.get("isn", []) if i.get("stats", {}).get("batches")]
    if per_isn:
        row["isn_compute_ms"] = max(1000 * c / b for c, b in per_isn)
    spans = {}
    for b in (m.get("timeline") or {}).get("batches", []):
        for i in b.get("isn", []):
            if not i.get("missing") and i.get("start") is not None and i.get("end") is not None:
                spans.setdefault(i["rank"], []).append((i["start"], i["end"]))
    busy = []
    for intervals in spans.values():
        intervals.sort()
        computed, reach = 0.0, intervals[0][0]
        for start, end in intervals:
            computed += max(0.0, end - max(start, reach))
            reach = max(reach, end)
        if reach > intervals[0][0]:
            busy.append(computed / (reach - intervals[0][0]))
    if busy:
        row["isn_busy"] = max(busy)
    row["admission"] = m.get("admission", {}).get("mode")
json.dump(row, open(rowf, "w"), indent=1)
print(f"   {row['name']}: {row.get('queries_per_second') or 0:.0f} q/s, p99 "
      f"{row.get('p99_ms')} ms, merge share {row.get('merge_share', '-')}, {cmp}")
EOF
}

if [ "$summarize_only" = 0 ]; then
  log "host: $host_gpus GPU(s), $(nproc) cores; engine $engine; G: $(gpu_counts | tr '\n' ' ')"
  for phase in $phases; do
    case "$phase" in
      per-isn)
        for d in $docs_list; do
          idx=$(index_for "$d") || continue
          for g in $(gpu_counts); do for b in $batches; do for k in $ks; do for sp in $(splits_for "$g"); do
            run_row "per-isn-d$d-g$g-b$b-k$k$(suffix "$sp")" per-isn "$d" "$idx" "$idx" 1 "$g" "$b" "$k" 0 \
              "$sp" || true
          done; done; done; done
        done ;;
      per-node)
        d=${docs_list%% *}
        idx=$(index_for "$d") || continue
        for g in $(gpu_counts); do
          [ "$g" -gt 1 ] || [ "$engine" = cpu ] || continue
          for r in $rates; do
            for sp in $(splits_for "$g"); do
              run_row "per-node-vertical-d$d-g$g-r$r$(suffix "$sp")" per-node "$d" "$idx" "$idx" 1 "$g" \
                1024 10 "$r" "$sp" || true
            done
            sidx=$(split_for "$idx" "$g") || continue
            run_row "per-node-horizontal-d$d-g$g-r$r" per-node "$d" "$idx" "$sidx" "$g" 1 1024 10 \
              "$r" || true
          done
        done ;;
      weak)
        for g in $(gpu_counts); do
          d=$(( g * docs_per_gpu ))
          idx=$(index_for "$d") || continue
          for sp in $(splits_for "$g"); do
            run_row "weak-g$g-d$d$(suffix "$sp")" weak "$d" "$idx" "$idx" 1 "$g" 1024 10 0 "$sp" || true
          done
        done ;;
    esac
  done
fi

# The summary: every row, the machine, weak scaling; JSON and Markdown.
python3 - "$out" <<'EOF'
import glob, json, os, re, sys
out = sys.argv[1]
rows = [json.load(open(f)) for f in sorted(glob.glob(os.path.join(out, "runs", "*.row.json")))]
machine = {"gpus": 0, "gpu_names": [], "cores": None, "nccl": []}
for line in open(os.path.join(out, "machine.txt")):
    if line.startswith("cores "): machine["cores"] = int(line.split()[1])
    elif line.startswith("gpus "): machine["gpus"] = int(line.split()[1])
    elif line.startswith("GPU "): machine["gpu_names"].append(line.strip())
nccl = os.path.join(out, "nccl-info.txt")
if os.path.exists(nccl):
    machine["nccl"] = [l.rstrip() for l in open(nccl)]
    v = [re.search(r"NCCL version (\S+)", l) for l in machine["nccl"]]
    machine["nccl_version"] = next((x.group(1) for x in v if x), None)
weak = sorted((r for r in rows if r["phase"] == "weak" and r.get("queries_per_second")),
              key=lambda r: (r["gpus"], r.get("split", "ranges")))
one = next((r for r in weak if r["gpus"] == 1), None)
weak_scaling = []
for r in weak:
    e = None
    if one:
        e = (r["queries_per_second"] * r["docs"]) / (r["gpus"] * one["queries_per_second"] * one["docs"])
    ec = None  # the same from the ISN's compute per batch (every weak row: batch 1,024)
    if one and r.get("isn_compute_ms") and one.get("isn_compute_ms"):
        ec = (r["docs"] / r["isn_compute_ms"]) / (r["gpus"] * one["docs"] / one["isn_compute_ms"])
    weak_scaling.append({"gpus": r["gpus"], "split": r.get("split", "ranges"), "docs": r["docs"],
                         "queries_per_second": r["queries_per_second"],
                         "weak_scaling_efficiency": e,
                         "isn_compute_ms": r.get("isn_compute_ms"),
                         "weak_scaling_efficiency_compute": ec})
result = {"machine": machine, "rows": rows, "weak_scaling": weak_scaling,
          "exact": all(r.get("exact") for r in rows)}
json.dump(result, open(os.path.join(out, "multi-gpu.json"), "w"), indent=1)
def f(v, spec):
    return "-" if v is None else format(v, spec)
lines = [f"machine: {machine['gpus']} GPU(s), {machine['cores']} cores; NCCL "
         f"{machine.get('nccl_version', '?')}", "",
         "| run | ISNs x GPUs | split | documents | batch | k | rate | q/s | p50 ms | p99 ms | merge share | compute ms/batch | ISN busy | exact |",
         "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
for r in rows:
    split = r.get("split", "ranges") if r["gpus_per_isn"] > 1 else "-"
    lines.append(f"| {r['name']} | {r['isns']} x {r['gpus_per_isn']} | {split} | {r['docs']:,} | {r['batch']} | "
                 f"{r['k']} | {r['rate'] or 'closed'} | {f(r.get('queries_per_second'), ',.0f')} | "
                 f"{f(r.get('p50_ms'), '.2f')} | {f(r.get('p99_ms'), '.2f')} | "
                 f"{f(r.get('merge_share'), '.1%')} | {f(r.get('isn_compute_ms'), '.2f')} | "
                 f"{f(r.get('isn_busy'), '.0%')} | {'yes' if r.get('exact') else 'NO: ' + r['compare']} |")
flags = sorted({r.get("cluster_flags") or "" for r in rows})
if flags != [""]:
    lines += ["", "cluster flags: " + "; ".join(repr(x) for x in flags)]
if weak_scaling:
    lines += ["", "| GPUs | split | documents | q/s | weak-scaling efficiency | compute ms/batch | by compute |",
              "| --- | --- | --- | --- | --- | --- | --- |"]
    lines += [f"| {w['gpus']} | {w['split'] if w['gpus'] > 1 else '-'} | {w['docs']:,} | "
              f"{w['queries_per_second']:,.0f} | {f(w['weak_scaling_efficiency'], '.3f')} | "
              f"{f(w['isn_compute_ms'], '.2f')} | {f(w['weak_scaling_efficiency_compute'], '.3f')} |"
              for w in weak_scaling]
open(os.path.join(out, "multi-gpu.md"), "w").write("\n".join(lines) + "\n")
print("\n".join(lines))
print(f"wrote {os.path.join(out, 'multi-gpu.json')}: {len(rows)} rows, "
      f"{'every one exact' if result['exact'] else 'NOT all exact'}")
EOF
