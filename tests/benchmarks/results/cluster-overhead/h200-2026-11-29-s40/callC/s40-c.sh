#!/usr/bin/env bash
# Session 40, call C (issue 16): where four ISNs' extra CPU goes. Round-robin shards, CPU engine,
# 1M documents, 60,000 queries, batch 1,024, just in time, 3 interleaved reps: the default, the
# ISNs not sharing (_noshare) and the engine thread always asleep between batches (_sleephand);
# each ISN's CPU during its engine calls against between them (cpu_seconds.in_engine_calls).
set -u
export NCCL_NVLS_ENABLE=0
bin=.gpuhost/s40c/bin
gunzip -f $bin/*.gz && chmod +x $bin/*
export LD_LIBRARY_PATH=/opt/deps/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export GPUSEARCH_DEBS=.gpuhost/rt-debs GPUSEARCH_BIN=$bin
launch/gpu-host.sh deps > /dev/null 2>&1 || true
t0=$(date +%s)
res=/tmp/s40c; mkdir -p $res
export OVERHEAD_QUERIES=60000 OVERHEAD_LATENCY_REPS=0 OVERHEAD_PROBE_REPS=0 \
  OVERHEAD_ENGINES=cpu OVERHEAD_BATCHES=1024 OVERHEAD_ISNS="1 4" OVERHEAD_SPLIT=round-robin
OUT=$res/jit OVERHEAD_REPS=3 OVERHEAD_VARIANTS="adaptive adaptive_noshare adaptive_sleephand" \
  timeout 330 launch/gpu-host.sh overhead > $res/overhead_jit.log 2>&1
echo "overhead jit: exit $? ($(( $(date +%s) - t0 )) s)"
grep -E "^overhead cpu: " $res/overhead_jit.log | head -9
cp "$0" $res/
(cd /tmp && find s40c -type f \( -name '*.json' -o -name '*.log' -o -name '*.md' -o -name '*.txt' \
  -o -name '*.sh' -o -name '*.png' \) -size -20M -not -path '*/index*' -not -path '*/runs/*.run' -print0 |
  tar --null -T - -czf "$OUT/s40c.tar.gz")
ls -la "$OUT"
