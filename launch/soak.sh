#!/usr/bin/env bash
# Soak benchmark (not a CI test): the cluster serving through its RPC front end at a fraction of
# its measured peak for a long time, sampling RSS and open file descriptors of every rank.
#
#   launch/soak.sh --out DIR [--minutes 10] [--fraction 0.9] [--isns 2] [--docs 20000]
#                  [--index DIR] [--sample-s 5] [--peak-qps R] [--peak-probe-s 5]
#                  [--peak-p99-ms 250]
#
# 1. Builds a synthetic index (or uses --index, which must have --isns shards) and starts
#    launch/cluster.sh --listen 127.0.0.1:0.
# 2. Peak (unless --peak-qps R): open-loop Poisson probes of --peak-probe-s seconds at rising
#    rates, from 50/s doubling, then bisecting between the last sustained rate and the first
#    failed one (4 steps). A rate is sustained when every request is answered without error, the
#    throughput is at least 95% of the offered rate and the p99 latency at most --peak-p99-ms.
#    Peak = the highest sustained probe's throughput (at most its rate); every probe in
#    DIR/peak.json. (A flood far
#    above capacity measures the refusals, not the capacity: NOTES-frontend.md.)
# 3. Soak: one `gpusearch load --poisson` per minute at fraction x peak, ids prefixed m<i>- so
#    that every query id of the soak is distinct; meanwhile every rank's VmRSS and open fds are
#    sampled every --sample-s seconds.
# 4. Shutdown, then DIR/soak.json: per-minute throughput, p50/p99/max, errors; RSS per rank at
#    the end of minute 1 (after warm-up) and at the end, growth in percent; fds; lost answers
#    (sent - answered), duplicate ids in the cluster's run; goals met or not. DIR/soak.png plots
#    RSS and p99 per minute when matplotlib is present.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${GPUSEARCH_BUILD_DIR:-$root/build}
gs=$build/bin/gpusearch
out="" minutes=10 fraction=0.9 isns=2 docs=20000 index="" sample_s=5 peak="" probe_s=5 peak_p99_ms=250
while [ $# -gt 0 ]; do
  case "$1" in
    --out) out=$2; shift 2 ;;
    --minutes) minutes=$2; shift 2 ;;
    --fraction) fraction=$2; shift 2 ;;
    --isns) isns=$2; shift 2 ;;
    --docs) docs=$2; shift 2 ;;
    --index) index=$2; shift 2 ;;
    --sample-s) sample_s=$2; shift 2 ;;
    --peak-qps) peak=$2; shift 2 ;;
    --peak-probe-s) probe_s=$2; shift 2 ;;
    --peak-p99-ms) peak_p99_ms=$2; shift 2 ;;
    -h|--help) sed -n '2,28p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "soak.sh: unknown flag $1" >&2; exit 2 ;;
  esac
done
[ -n "$out" ] || { echo "soak.sh: --out DIR is required" >&2; exit 2; }
mkdir -p "$out"
out=$(cd "$out" && pwd)
[ -x "$gs" ] || { echo "soak.sh: build first (launch/build.sh)" >&2; exit 2; }
if [ -z "$index" ]; then
  index=$out/index
  [ -f "$index/manifest.json" ] ||
    "$gs" -q index --synthetic "docs=$docs,seed=7,train_queries=10,test_queries=5000" \
      --shards "$isns" --out "$index" --force > /dev/null
fi
queries=$index/queries.test.tsv

echo "soak.sh: starting the cluster ($isns ISNs) on $index"
rm -f "$out/address"
"$root/launch/cluster.sh" -q --index "$index" --listen 127.0.0.1:0 --isns "$isns" --mode and-or \
  --k 10 --run "$out/cluster-run.txt" --metrics "$out/cluster-metrics.json" \
  --address-file "$out/address" > "$out/cluster.log" 2>&1 &
cluster=$!
cleanup() { kill -TERM "$cluster" 2>/dev/null || true; }
trap cleanup EXIT
for _ in $(seq 1 600); do [ -s "$out/address" ] && break; sleep 0.1; done
[ -s "$out/address" ] || { cat "$out/cluster.log"; echo "soak.sh: the cluster did not start" >&2; exit 1; }
addr=$(cat "$out/address")

# Every rank of the job: the aggregator and the ISNs on this host (children of mpirun).
ranks() { pgrep -f "gpusearch-(aggregator|isn) --index $index" | tr '\n' ' '; }
sample() {  # one JSON line per rank and sample
  local t=$1 p
  for p in $(ranks); do
    local name rss fds
    name=$(tr '\0' ' ' < "/proc/$p/cmdline" 2>/dev/null | awk '{print $1}' | xargs -r basename) || continue
    rss=$(awk '/^VmRSS/ {print $2 * 1024}' "/proc/$p/status" 2>/dev/null) || continue
    fds=$(ls "/proc/$p/fd" 2>/dev/null | wc -l)
    echo "{\"t\": $t, \"pid\": $p, \"program\": \"$name\", \"rss_bytes\": ${rss:-0}, \"fds\": $fds}"
  done
}

# probe RATE N: the N-th probe, one open-loop load of probe_s seconds; prints its throughput if
# the rate was sustained, else nothing. Each probe's ids get their own prefix (the soak counts
# duplicates). run_probe RATE: the next probe (counted here, not in probe's subshell); tp=.
probe() {
  local json=$out/peak-probe-$2.json
  "$gs" load --connect "$addr" --queries "$queries" --qps "$1" --poisson --seed "$2" \
    --duration "$probe_s" --drain 30 --id-prefix "peak$2-" --metrics "$json" \
    > "$out/peak-probe-$2.log" 2>&1 || true
  python3 - "$json" "$1" "$peak_p99_ms" <<'PY'
import json, sys
try:
    m = json.load(open(sys.argv[1]))
except (OSError, ValueError):
    sys.exit(0)
rate, p99_bound = float(sys.argv[2]), float(sys.argv[3])
ok = (m["answered"] == m["sent"] and sum(m["errors"].values()) == 0
      and m["throughput_qps"] >= 0.95 * min(rate, m["offered_qps"] or rate)
      and m["latency_ms"].get("p99", 1e18) <= p99_bound)
print(f"soak.sh: probe {rate:g}/s: throughput {m['throughput_qps']:.1f}/s, p99 "
      f"{m['latency_ms'].get('p99', float('nan')):.1f} ms: {'sustained' if ok else 'not sustained'}",
      file=sys.stderr)
if ok:
    print(round(min(m["throughput_qps"], rate), 1))  # a Poisson probe may offer more than its rate
PY
}
probes=0
run_probe() {
  probes=$((probes + 1))
  tp=$(probe "$1" "$probes")
}
if [ -z "$peak" ]; then
  echo "soak.sh: measuring the peak (open-loop probes of $probe_s s at rising rates)"
  good=0 good_tp="" bad=""
  rate=50
  while [ -z "$bad" ]; do
    run_probe "$rate"
    if [ -n "$tp" ]; then
      good=$rate good_tp=$tp
      [ "$rate" -ge 20000 ] && break
      rate=$((rate * 2))
    else
      bad=$rate
    fi
  done
  if [ -n "$bad" ] && [ "$good" -eq 0 ]; then  # not even 50/s: halve down to 1/s
    rate=25
    while [ "$rate" -ge 1 ] && [ -z "$good_tp" ]; do
      run_probe "$rate"
      if [ -n "$tp" ]; then good=$rate good_tp=$tp; else bad=$rate; rate=$((rate / 2)); fi
    done
  fi
  if [ -n "$bad" ] && [ -n "$good_tp" ]; then
    for _ in 1 2 3 4; do
      mid=$(( (good + bad) / 2 ))
      [ "$mid" -le "$good" ] && break
      run_probe "$mid"
      if [ -n "$tp" ]; then good=$mid good_tp=$tp; else bad=$mid; fi
    done
  fi
  [ -n "$good_tp" ] || { echo "soak.sh: no probe rate was sustained (not even 1/s)" >&2; exit 1; }
  peak=$good_tp
  python3 - "$out" "$probes" "$good" "$peak" "$probe_s" "$peak_p99_ms" <<'PY'
import json, sys
out, n, good, peak = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4])
probes = []
for i in range(1, n + 1):
    try:
        m = json.load(open(f"{out}/peak-probe-{i}.json"))
    except (OSError, ValueError):
        continue
    probes.append({k: m[k] for k in ("target_qps", "offered_qps", "sent", "answered", "errors",
                                      "throughput_qps")} | {"latency_p99_ms": m["latency_ms"].get("p99")})
json.dump({"method": "open-loop Poisson probes at rising rates, then bisection",
           "probe_s": float(sys.argv[5]), "p99_bound_ms": float(sys.argv[6]),
           "highest_sustained_rate": good, "peak_qps": peak, "probes": probes},
          open(f"{out}/peak.json", "w"), indent=2)
PY
fi
rate=$(python3 -c "print(round($peak * $fraction, 1))")
echo "soak.sh: peak $peak queries/s; soaking at $rate queries/s for $minutes minutes"

: > "$out/samples.jsonl"
start=$(date +%s)
( while :; do sample $(( $(date +%s) - start )) >> "$out/samples.jsonl"; sleep "$sample_s"; done ) &
sampler=$!
for m in $(seq 1 "$minutes"); do
  "$gs" load --connect "$addr" --queries "$queries" --qps "$rate" --poisson --seed "$m" \
    --duration 60 --drain 30 --id-prefix "m$m-" --run "$out/minute-$m.run" \
    --metrics "$out/minute-$m.json" > "$out/minute-$m.log" 2>&1 || true
  tail -2 "$out/minute-$m.log" | head -1 | sed "s/^/minute $m: /"
done
kill "$sampler" 2>/dev/null || true
"$gs" query --connect "$addr" --shutdown --token-file "$out/cluster-run.txt.token" > /dev/null
wait "$cluster" || echo "soak.sh: the cluster exited with $?" >&2
trap - EXIT

python3 - "$out" "$minutes" "$peak" "$rate" <<'EOF'
import collections, json, os, sys
out, minutes, peak, rate = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4])
per_minute = []
sent = answered = 0
for m in range(1, minutes + 1):
    j = json.load(open(f"{out}/minute-{m}.json"))
    sent += j["sent"]; answered += j["answered"]
    per_minute.append({"minute": m, "sent": j["sent"], "answered": j["answered"],
                       "errors": j["errors"], "throughput_qps": j["throughput_qps"],
                       "p50_ms": j["latency_ms"].get("p50"), "p99_ms": j["latency_ms"].get("p99"),
                       "max_ms": j["latency_ms"].get("max")})
samples = [json.loads(l) for l in open(f"{out}/samples.jsonl") if l.strip()]
by_pid = collections.defaultdict(list)
for s in samples:
    by_pid[(s["pid"], s["program"])].append(s)
ranks = []
for (pid, prog), ss in sorted(by_pid.items()):
    ss.sort(key=lambda s: s["t"])
    warm = [s for s in ss if s["t"] >= 60] or ss
    base, last = warm[0]["rss_bytes"], ss[-1]["rss_bytes"]
    ranks.append({"pid": pid, "program": prog, "rss_after_warmup_bytes": base,
                  "rss_end_bytes": last, "rss_max_bytes": max(s["rss_bytes"] for s in ss),
                  "rss_growth_percent": 100.0 * (last - base) / base if base else None,
                  "fds_min": min(s["fds"] for s in ss), "fds_max": max(s["fds"] for s in ss)})
ids = collections.Counter(l.split()[0] for l in open(f"{out}/cluster-run.txt") if l.strip())
# A query answered with no hits has no run line: count answers through the load runs' ids.
load_ids = set()
for m in range(1, minutes + 1):
    for l in open(f"{out}/minute-{m}.run"):
        load_ids.add(l.split()[0])
answers = collections.Counter(tuple(l.split()[0:4:3]) for l in open(f"{out}/cluster-run.txt") if l.strip())
dups = sum(c - 1 for c in answers.values() if c > 1)  # the same (id, rank) written twice
p99 = [p["p99_ms"] for p in per_minute if p["p99_ms"] is not None]
report = {
    "peak_qps": peak, "rate_qps": rate, "minutes": minutes, "sent": sent, "answered": answered,
    "lost_answers": sent - answered,
    "run_ids_missing_from_cluster_run": len(load_ids - set(ids)),
    "duplicate_answers": dups,
    "per_minute": per_minute, "ranks": ranks,
    "p99_first_minute_ms": p99[0] if p99 else None, "p99_last_minute_ms": p99[-1] if p99 else None,
    "goals": {
        "zero_lost": sent == answered,
        "zero_duplicates": dups == 0,
        "rss_growth_under_5_percent": all(r["rss_growth_percent"] is not None and
                                          r["rss_growth_percent"] < 5 for r in ranks),
        "p99_stable_within_25_percent": bool(p99) and p99[-1] <= 1.25 * p99[0],
    },
}
json.dump(report, open(f"{out}/soak.json", "w"), indent=2)
print(json.dumps({k: report[k] for k in ("peak_qps", "rate_qps", "sent", "answered",
                                         "lost_answers", "duplicate_answers", "p99_first_minute_ms",
                                         "p99_last_minute_ms", "goals")}, indent=2))
for r in ranks:
    print(f"  {r['program']} pid {r['pid']}: RSS {r['rss_after_warmup_bytes']/2**20:.1f} -> "
          f"{r['rss_end_bytes']/2**20:.1f} MiB ({r['rss_growth_percent']:+.2f}%), fds "
          f"{r['fds_min']}..{r['fds_max']}")
EOF
# The plot: matplotlib from Debian's python3-matplotlib (a pyenv python3 first on PATH lacks it).
plot_python=python3
python3 -c 'import matplotlib' 2> /dev/null || plot_python=/usr/bin/python3
"$plot_python" "$root/launch/plot-soak.py" "$out" || true
