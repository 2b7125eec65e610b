#!/usr/bin/env bash
# Session 42, call D (issue 16): just in time with a lead (the next batch aimed 0.1 or 0.3 mean
# computes before the slowest ISN is predicted to finish: --admission-lag -0.1/-0.3), so that the
# ISNs that finish a batch before the slowest find the next one waiting, against the default
# (lag 0). c87cfc3's binaries (HEAD's engine and cluster code). Four ISNs against one at batch
# 1,024 (CPU engine, 1M documents, 240,000 queries, and-or, round-robin shards, 3 reps).
set -u
source launch/device-env.sh .gpuhost/s41d/bin
t0=$(date +%s)
res=/tmp/s42d; mkdir -p $res
new=$(cd .gpuhost/s41d && pwd)
pack() { cp "$0" $res/; (cd /tmp && find s42d -type f \( -name '*.json' -o -name '*.log' -o -name '*.txt' -o -name '*.sh' \) \
  -size -20M -not -path '*/index*' -print0 | tar --null -T - -czf "$OUT/s42d.tar.gz"); }
idx=$res/b1024/index; mkdir -p $res/b1024
$new/bin/gpusearch -q index --synthetic "docs=1000000,seed=7,test_queries=240000" --out $idx > $res/index.log 2>&1
echo "index: $(( $(date +%s) - t0 )) s"
launch/bench-cluster-overhead.sh --out $res/b1024 --build $new --engine cpu \
  --index $idx --queries 240000 --batches 1024 --isns "1 4" --reps 3 --split round-robin \
  --variants "adaptive adaptive_lead1 adaptive_lead3" --probe-reps 0 --latency-reps 0 > $res/b1024.log 2>&1
echo "batch 1024: exit $? ($(( $(date +%s) - t0 )) s)"; sed -n '/^variant /,/^in process/p' $res/b1024.log
grep -E "ISN\(s\) batch" $res/b1024.log
pack; ls -la "$OUT"
