#!/usr/bin/env bash
# The RPC front end's latency at several rates (issue 14): one serving cluster per build
# directory, `gpusearch load --poisson` at each rate through 127.0.0.1, the load generator's JSON
# per rate and build, and a table of latency, server time and added (RPC) time.
#
#   launch/bench-frontend.sh --out DIR [--builds "before=DIR1 after=DIR2%0,rt"] [--rates "100 200 400"]
#                            [--duration 10] [--repeats 1] [--docs 2000] [--isns 2]
#                            [--transport tcp|unix]
#
# Builds are named NAME=BUILD_DIR[@SERVER_POLL[,CLIENT_POLL]][%THREAD] (binaries in BUILD_DIR/bin);
# default after=build. A name starting with "floor" runs BUILD_DIR/bin/bench_rpc_floor instead of
# a cluster: a server that answers at once, so its added_ms is what Cap'n Proto RPC over loopback
# costs on this machine. @SERVER_POLL,CLIENT_POLL (block, adaptive or spin; the client's
# defaults to the server's) are passed as --rpc-poll to the server and to gpusearch load; without
# them neither gets the flag (a build from before it). %THREAD (CPU, rt or CPU,rt) is passed as
# --rpc-thread to the server (its event loop; the merge thread goes to the CPU too) and to
# gpusearch load, so that the client runs on the loop's CPU. Rounds alternate the builds (before,
# after, floor, before, ...) so that a shared machine's load falls on all alike. Each round
# starts a fresh cluster (cpu engine, 1 thread per ISN, and-or, k 10).
# --transport unix: server and clients meet on a Unix-domain socket (unix:DIR/NAME-rR.sock)
# instead of TCP over 127.0.0.1; a name ending in "-unix" or "-tcp" picks it for that build only.
# DIR/NAME-rR-qpsQ.json per run; DIR/summary.md and DIR/summary.json (medians over rounds too),
# with the CPU the client and the server's event loop used per second of the run.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out="" builds="after=$root/build" rates="100 200 400" duration=10 repeats=1 docs=2000 isns=2
transport=tcp
while [ $# -gt 0 ]; do
  case "$1" in
    --out) out=$2; shift 2 ;;
    --builds) builds=$2; shift 2 ;;
    --rates) rates=$2; shift 2 ;;
    --duration) duration=$2; shift 2 ;;
    --repeats) repeats=$2; shift 2 ;;
    --docs) docs=$2; shift 2 ;;
    --isns) isns=$2; shift 2 ;;
    --transport) transport=$2; shift 2 ;;
    -h|--help) sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "bench-frontend.sh: unknown flag $1" >&2; exit 2 ;;
  esac
done
[ -n "$out" ] || { echo "bench-frontend.sh: --out DIR is required" >&2; exit 2; }
mkdir -p "$out"
out=$(cd "$out" && pwd)
first_build=${builds%% *}
first_build=${first_build#*=}
first_build=${first_build%%@*}
first_build=${first_build%%%*}
index=$out/index
[ -f "$index/manifest.json" ] ||
  "$first_build/bin/gpusearch" -q index --synthetic "docs=$docs,seed=7,train_queries=10,test_queries=2000" \
    --shards "$isns" --out "$index" --force > /dev/null
queries=$index/queries.test.tsv

cluster=""
cleanup() { [ -z "$cluster" ] || kill -TERM "$cluster" 2>/dev/null || true; }
trap cleanup EXIT

for r in $(seq 1 "$repeats"); do
  for b in $builds; do
    name=${b%%=*} dir=${b#*=} server_poll=() client_poll=()
    if [ "$dir" != "${dir#*%}" ]; then
      server_poll+=(--rpc-thread "${dir#*%}")
      client_poll+=(--rpc-thread "${dir#*%}")
      dir=${dir%%%*}
    fi
    if [ "$dir" != "${dir#*@}" ]; then
      polls=${dir#*@} dir=${dir%%@*}
      server_poll+=(--rpc-poll "${polls%%,*}")
      client_poll+=(--rpc-poll "${polls#*,}")
    fi
    run=$out/$name-r$r
    rm -f "$run.address" "$run.sock"
    how=$transport
    case "$name" in *-unix) how=unix ;; *-tcp) how=tcp ;; esac
    case "$how" in
      tcp) listen=127.0.0.1:0 ;;
      unix) listen=unix:$run.sock ;;
      *) echo "bench-frontend.sh: --transport tcp or unix, not $how" >&2; exit 2 ;;
    esac
    case "$name" in
    floor*)
      "$dir/bin/bench_rpc_floor" --listen "$listen" --address-file "$run.address" "${server_poll[@]}" \
        > "$run.cluster.log" 2>&1 & ;;
    *)
      GPUSEARCH_BUILD_DIR=$dir "$root/launch/cluster.sh" -q --index "$index" --listen "$listen" \
        --isns "$isns" --threads 1 --engine cpu --mode and-or --k 10 --run "$run.cluster-run.txt" \
        --metrics "$run.cluster-metrics.json" --address-file "$run.address" "${server_poll[@]}" \
        > "$run.cluster.log" 2>&1 & ;;
    esac
    cluster=$!
    for _ in $(seq 1 600); do [ -s "$run.address" ] && break; sleep 0.1; done
    [ -s "$run.address" ] || { cat "$run.cluster.log"; echo "bench-frontend.sh: no cluster" >&2; exit 1; }
    addr=$(cat "$run.address")
    # A short warm-up (connections, caches, the depth model) outside the measurement.
    "$dir/bin/gpusearch" load --connect "$addr" --queries "$queries" --qps 200 --duration 2 \
      --id-prefix "warm-" "${client_poll[@]}" > /dev/null 2>&1 || true
    for q in $rates; do
      "$dir/bin/gpusearch" load --connect "$addr" --queries "$queries" --qps "$q" --poisson \
        --duration "$duration" --id-prefix "q$q-" --metrics "$out/$name-r$r-qps$q.json" "${client_poll[@]}" \
        > "$out/$name-r$r-qps$q.log" 2>&1 || true
      tail -2 "$out/$name-r$r-qps$q.log" | sed "s/^/$name r$r $q: /"
    done
    kill -TERM "$cluster"
    wait "$cluster" || true
    cluster=""
  done
done

python3 - "$out" "$builds" "$rates" "$repeats" <<'EOF'
import json, os, sys
out, builds, rates, repeats = sys.argv[1], sys.argv[2].split(), sys.argv[3].split(), int(sys.argv[4])
rows, table = [], {}
for b in builds:
    name = b.split("=", 1)[0]
    for q in rates:
        for r in range(1, repeats + 1):
            path = f"{out}/{name}-r{r}-qps{q}.json"
            if not os.path.exists(path):
                continue
            m = json.load(open(path))
            row = {"build": name, "round": r, "target_qps": int(q), "sent": m["sent"],
                   "answered": m["answered"], "errors": sum(v for v in m["errors"].values()),
                   "throughput_qps": round(m["throughput_qps"], 1)}
            # CPU per second of the run: 1.0 is a whole core (a spinning loop).
            secs = m.get("seconds") or 0
            for key in ("client_cpu_s", "server_loop_cpu_s"):
                v = m.get(key)
                row[key.replace("_s", "_per_s")] = round(v / secs, 3) if v is not None and secs else None
            for key in ("latency_ms", "server_ms", "added_ms"):
                for p in ("p50", "p99"):
                    row[f"{key[:-3]}_{p}"] = round(m[key].get(p, float("nan")), 3)
            rows.append(row)
# Medians over rounds (the median of the per-round values) per build and rate.
def median(v):
    v = sorted(v)
    return v[len(v) // 2] if len(v) % 2 else (v[len(v) // 2 - 1] + v[len(v) // 2]) / 2
medians = []
for b in builds:
    name = b.split("=", 1)[0]
    for q in rates:
        rs = [x for x in rows if x["build"] == name and x["target_qps"] == int(q)]
        if rs:
            medians.append({"build": name, "target_qps": int(q), "rounds": len(rs),
                            **{k: round(median([x[k] for x in rs]), 3)
                               for k in ("latency_p50", "latency_p99", "server_p50", "added_p50",
                                         "added_p99", "throughput_qps")},
                            **{k: (round(median([x[k] for x in rs]), 3)
                                   if all(x[k] is not None for x in rs) else None)
                               for k in ("client_cpu_per_s", "server_loop_cpu_per_s")}})
json.dump({"runs": rows, "medians": medians}, open(f"{out}/summary.json", "w"), indent=2)
cols = ["build", "round", "target_qps", "sent", "answered", "errors", "throughput_qps",
        "latency_p50", "latency_p99", "server_p50", "server_p99", "added_p50", "added_p99",
        "client_cpu_per_s", "server_loop_cpu_per_s"]
mcols = ["build", "target_qps", "rounds", "throughput_qps", "latency_p50", "latency_p99",
         "server_p50", "added_p50", "added_p99", "client_cpu_per_s", "server_loop_cpu_per_s"]
with open(f"{out}/summary.md", "w") as f:
    f.write("| " + " | ".join(cols) + " |\n| " + " | ".join("---" for _ in cols) + " |\n")
    for row in sorted(rows, key=lambda x: (x["target_qps"], x["build"], x["round"])):
        f.write("| " + " | ".join(str(row[c]) for c in cols) + " |\n")
    f.write("\nMedians over rounds:\n\n")
    f.write("| " + " | ".join(mcols) + " |\n| " + " | ".join("---" for _ in mcols) + " |\n")
    for row in sorted(medians, key=lambda x: (x["target_qps"], x["build"])):
        f.write("| " + " | ".join(str(row[c]) for c in mcols) + " |\n")
print(open(f"{out}/summary.md").read())
EOF
