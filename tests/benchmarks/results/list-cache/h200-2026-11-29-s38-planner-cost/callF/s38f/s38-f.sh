#!/usr/bin/env bash
# Session 38, call F (issue 10). Call E at vfb 1/10 (1 replay thread): replaying one served
# query in 4 took the online arm from 0.956 to 1.001 the offline plan. The same at 1/25 and
# 1/50, where replaying every query won before (1/50) or lost (1/25). 4 rounds each.
set -u
export NCCL_NVLS_ENABLE=0
export GPUSEARCH_DEBS=.gpuhost/rt-debs
gunzip -f .gpuhost/s38a/bin/*.gz; chmod +x .gpuhost/s38a/bin/*
export LD_LIBRARY_PATH=/opt/deps/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export GPUSEARCH_BIN=.gpuhost/s38a/bin
launch/gpu-host.sh deps > /dev/null 2>&1 || true
res=/tmp/s38f; mkdir -p $res
t0=$(date +%s)
for ratio in 25 50; do
  OUT=$res/vfb1-ratio$ratio-sample DRIFT_POLICY=vfb:1 DRIFT_ROUNDS=4 DRIFT_PLANNER_THREADS=1 \
    DRIFT_ONLINE="idle:0:0:gaps:gaps:8:1,idle:0:0:gaps:gaps:8:4" \
    CACHE_ARGS="--drift-ratio $ratio" timeout 250 launch/gpu-host.sh cache-drift > $res/drift_$ratio.log 2>&1
  echo "ratio $ratio: exit $? ($(( $(date +%s) - t0 )) s)"
  grep -E '^drifting log.*(online|offline)|/ offline' $res/vfb1-ratio$ratio-sample/cache_drift.log | cut -c1-200
done
cp "$0" $res/
tar -C /tmp -czf "$OUT/s38f.tar.gz" s38f
