#!/usr/bin/env bash
# Session 40, call D (issue 16): window admission, round-robin shards, CPU engine, 1M documents,
# 60,000 queries, batch 1,024, 4 interleaved reps: queued batches joining one engine call (the
# default, now also for sharing ISNs) against a call per batch (_coalesce1). Call C's binaries.
set -u
export NCCL_NVLS_ENABLE=0
bin=.gpuhost/s40c/bin
gunzip -f $bin/*.gz && chmod +x $bin/*
export LD_LIBRARY_PATH=/opt/deps/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export GPUSEARCH_DEBS=.gpuhost/rt-debs GPUSEARCH_BIN=$bin
launch/gpu-host.sh deps > /dev/null 2>&1 || true
t0=$(date +%s)
res=/tmp/s40d; mkdir -p $res
export OVERHEAD_QUERIES=60000 OVERHEAD_LATENCY_REPS=0 OVERHEAD_PROBE_REPS=0 \
  OVERHEAD_ENGINES=cpu OVERHEAD_BATCHES=1024 OVERHEAD_ISNS="1 4" OVERHEAD_SPLIT=round-robin
OUT=$res/window OVERHEAD_REPS=4 OVERHEAD_VARIANTS="adaptive_window adaptive_window_coalesce1" \
  timeout 330 launch/gpu-host.sh overhead > $res/overhead_window.log 2>&1
echo "overhead window: exit $? ($(( $(date +%s) - t0 )) s)"
grep -E "^overhead cpu: " $res/overhead_window.log | head -7
cp "$0" $res/
(cd /tmp && find s40d -type f \( -name '*.json' -o -name '*.log' -o -name '*.md' -o -name '*.txt' \
  -o -name '*.sh' -o -name '*.png' \) -size -20M -not -path '*/index*' -not -path '*/runs/*.run' -print0 |
  tar --null -T - -czf "$OUT/s40d.tar.gz")
ls -la "$OUT"
