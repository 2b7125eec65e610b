#!/usr/bin/env bash
# Session 41, call A (issue 16): hardware counters per ISN process (bench_hw_counters in front of
# every ISN: user instructions and cycles, LLC misses, task clock, context switches) for one and
# four ISNs, just in time and window; long runs (240,000 queries) and short ones (2,048: the
# start-up's share, subtracted); CPU engine, 1M documents, batch 1,024, round-robin shards.
set -u
source launch/device-env.sh .gpuhost/s41a/bin
bin=$GPUSEARCH_BIN
t0=$(date +%s)
res=/tmp/s41a; mkdir -p $res
{ echo "perf_event_paranoid: $(cat /proc/sys/kernel/perf_event_paranoid)"; ls /sys/bus/event_source/devices; nproc; } > $res/pmu.txt 2>&1
$bin/bench_hw_counters --out-dir $res/pmu --tag probe -- /bin/true; cat $res/pmu/*.json >> $res/pmu.txt
cat $res/pmu.txt
export GPUSEARCH_ISN_PREFIX="$(pwd)/$bin/bench_hw_counters --out-dir $res/hw --"
# bench-cluster-overhead wants BUILD/bin: the carried folder is .gpuhost/s41a/bin
launch/bench-cluster-overhead.sh --out $res/long --build $(cd .gpuhost/s41a && pwd) --engine cpu \
  --docs 1000000 --queries 240000 --batches 1024 --isns "1 4" --reps 2 --split round-robin \
  --variants "adaptive adaptive_window" --probe-reps 0 --latency-reps 0 > $res/long.log 2>&1
echo "long: exit $? ($(( $(date +%s) - t0 )) s)"; sed -n '/^variant /,/^wrote /p' $res/long.log | head -20
launch/bench-cluster-overhead.sh --out $res/short --build $(cd .gpuhost/s41a && pwd) --engine cpu \
  --index $res/long/index --queries 2048 --batches 1024 --isns "1 4" --reps 2 --split round-robin \
  --variants "adaptive adaptive_window" --probe-reps 0 --latency-reps 0 > $res/short.log 2>&1
echo "short: exit $? ($(( $(date +%s) - t0 )) s)"
python3 - $res <<'PY'
import json, glob, sys, collections
res = sys.argv[1]
rows = collections.defaultdict(list)
for f in glob.glob(res + "/hw/*.json"):
    d = json.load(open(f)); rows[d["tag"]].append(d)
keys = ["instructions_user", "cycles_user", "llc_misses_user", "task_clock_ns", "context_switches"]
print("%-42s %5s %14s %14s %8s %12s %10s %9s" % ("run", "ISNs", "instr", "cycles", "ipc", "llc", "task s", "ctxsw"))
for tag in sorted(rows):
    ds = rows[tag]
    tot = {k: sum(d.get(k, 0) for d in ds) for k in keys}
    print("%-42s %5d %14.4g %14.4g %8.3f %12.4g %10.3f %9d" % (tag, len(ds), tot["instructions_user"], tot["cycles_user"],
          tot["instructions_user"] / tot["cycles_user"] if tot["cycles_user"] else 0, tot["llc_misses_user"], tot["task_clock_ns"] / 1e9, tot["context_switches"]))
PY
cp "$0" $res/
(cd /tmp && find s41a -type f \( -name '*.json' -o -name '*.log' -o -name '*.md' -o -name '*.txt' \
  -o -name '*.sh' -o -name '*.json.gz' \) -size -20M -not -path '*/index*' -not -path '*/runs/*.run' -print0 |
  tar --null -T - -czf "$OUT/s41a.tar.gz")
ls -la "$OUT"
