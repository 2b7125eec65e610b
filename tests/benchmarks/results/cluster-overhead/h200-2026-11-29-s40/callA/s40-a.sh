#!/usr/bin/env bash
# Session 40, call A (issue 16): four ISNs against one at batch 1,024, round-robin shards, CPU
# engine, 1M documents, 60,000 queries, interleaved reps; each ISN's threads pinned to its own
# slice of the cores (--pin-cores auto, variant _pin) or left to the kernel, just in time and
# with window admission.
set -u
export NCCL_NVLS_ENABLE=0
bin=.gpuhost/s40a/bin
gunzip -f $bin/*.gz && chmod +x $bin/*
export LD_LIBRARY_PATH=/opt/deps/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export GPUSEARCH_DEBS=.gpuhost/rt-debs GPUSEARCH_BIN=$bin
launch/gpu-host.sh deps > /dev/null 2>&1 || true
t0=$(date +%s)
res=/tmp/s40a; mkdir -p $res
lscpu > $res/lscpu.txt 2>&1
export OVERHEAD_QUERIES=60000 OVERHEAD_LATENCY_REPS=0 OVERHEAD_PROBE_REPS=0 \
  OVERHEAD_ENGINES=cpu OVERHEAD_BATCHES=1024 OVERHEAD_ISNS="1 4" OVERHEAD_SPLIT=round-robin
OUT=$res/jit OVERHEAD_REPS=5 OVERHEAD_VARIANTS="adaptive adaptive_pin" \
  timeout 280 launch/gpu-host.sh overhead > $res/overhead_jit.log 2>&1
echo "overhead jit: exit $? ($(( $(date +%s) - t0 )) s)"
grep -E "^overhead cpu: " $res/overhead_jit.log | head -12
if [ -f $res/jit/overhead-cpu/index/manifest.json ]; then
  OUT=$res/window OVERHEAD_REPS=4 OVERHEAD_VARIANTS="adaptive_window adaptive_window_pin" \
    OVERHEAD_DOCS=1000000 timeout 240 launch/gpu-host.sh overhead > $res/overhead_window.log 2>&1
  echo "overhead window: exit $? ($(( $(date +%s) - t0 )) s)"
  grep -E "^overhead cpu: " $res/overhead_window.log | head -12
fi
cp "$0" $res/
(cd /tmp && find s40a -type f \( -name '*.json' -o -name '*.log' -o -name '*.md' -o -name '*.txt' \
  -o -name '*.sh' -o -name '*.png' \) -size -20M -not -path '*/index*' -not -path '*/runs/*.run' -print0 |
  tar --null -T - -czf "$OUT/s40a.tar.gz")
ls -la "$OUT"
