#!/usr/bin/env bash
# Session 40, call G (issue 16): shards split by GS tier (gpusearch partition --split gs-tiers)
# against round-robin, CPU engine, 1M documents, 60,000 queries, batch 1,024, just in time,
# 3 interleaved reps each, one and four ISNs; the final code (call F's binaries).
set -u
export NCCL_NVLS_ENABLE=0
bin=.gpuhost/s40f/bin
gunzip -f $bin/*.gz && chmod +x $bin/*
export LD_LIBRARY_PATH=/opt/deps/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export GPUSEARCH_DEBS=.gpuhost/rt-debs GPUSEARCH_BIN=$bin
launch/gpu-host.sh deps > /dev/null 2>&1 || true
t0=$(date +%s)
res=/tmp/s40g; mkdir -p $res
export OVERHEAD_QUERIES=60000 OVERHEAD_LATENCY_REPS=0 OVERHEAD_PROBE_REPS=0 \
  OVERHEAD_ENGINES=cpu OVERHEAD_BATCHES=1024 OVERHEAD_ISNS="1 4"
for split in gs-tiers round-robin; do
  OUT=$res/$split OVERHEAD_SPLIT=$split OVERHEAD_REPS=3 OVERHEAD_VARIANTS=adaptive \
    timeout 200 launch/gpu-host.sh overhead > $res/overhead_$split.log 2>&1
  echo "overhead $split: exit $? ($(( $(date +%s) - t0 )) s)"
  grep -E "^overhead cpu: (variant|adaptive)" $res/overhead_$split.log
done
cp "$0" $res/
(cd /tmp && find s40g -type f \( -name '*.json' -o -name '*.log' -o -name '*.md' -o -name '*.txt' \
  -o -name '*.sh' -o -name '*.png' \) -size -20M -not -path '*/index*' -not -path '*/runs/*.run' -print0 |
  tar --null -T - -czf "$OUT/s40g.tar.gz")
ls -la "$OUT"
