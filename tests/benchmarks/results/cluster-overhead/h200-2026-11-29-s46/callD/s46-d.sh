#!/usr/bin/env bash
# Session 46, call D (issue 16): the 1 MiB shared-memory eager limit (the new default) against
# Open MPI's own 4 KiB (_eager0, the code before), with the default flags otherwise, one ISN and
# four at batch 1,024 (CPU engine, 1M documents, 240,000 queries, and-or, round-robin shards),
# as many interleaved reps as the device time left allows (7 planned). Calls B and C measured the
# default with the eager limit at 4/1 = 0.996 and 1.01 (3 reps each); session 45's default
# without it at 0.938 and 0.956.
set -u
source launch/device-env.sh .gpuhost/s46d/bin
t0=$(date +%s)
res=/tmp/s46d; mkdir -p $res
new=$(cd .gpuhost/s46d && pwd)
pack() { cp "$0" $res/; (cd /tmp && find s46d -type f \( -name '*.json' -o -name '*.json.gz' -o -name '*.log' -o -name '*.txt' -o -name '*.sh' \) \
  -size -20M -not -path '*/index*' -print0 | tar --null -T - -czf "$OUT/s46d.tar.gz"); }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
timeout 420 launch/bench-cluster-overhead.sh --out $res/b1024 --build $new --engine cpu \
  --docs 1000000 --queries 240000 --batches 1024 --isns "1 4" --reps 7 --split round-robin \
  --variants "adaptive adaptive_eager0" --probe-reps 0 --latency-reps 0 > $res/b1024.log 2>&1
echo "batch 1024: exit $? ($(( $(date +%s) - t0 )) s)"; sed -n '/^variant /,/^in process/p' $res/b1024.log
grep -E "ISN\(s\) batch" $res/b1024.log
python3 launch/summarize-cycle.py $res/b1024/runs > $res/cycle.txt 2>&1; cat $res/cycle.txt
pack; ls -la "$OUT"
