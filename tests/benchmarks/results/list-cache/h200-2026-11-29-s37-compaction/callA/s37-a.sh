#!/usr/bin/env bash
# Prepared in session 36 for the next device call (issue 10): the final list cache (call F's
# rule: lazy eviction, the first copy of a change whatever its size, rebuild past 1/32) where
# session 36 did not measure it: qtf at 1/10, and vfb:1 (the cache-drift step's default policy,
# which rebuilds more often in the CPU replay) at 1/10, 1/25 and 1/50; 3 rounds each.
# Before it: build, strip and gzip gpusearch, gpu_tests and bench_list_cache into
# .gpuhost/s37a/bin; copy this script to .gpuhost/s37-a.sh; carry .deps, .gpuhost/s37a and it.
# About 6-7 minutes on the H200 (index 45 s, each budget 45-60 s).
set -u
export NCCL_NVLS_ENABLE=0
gunzip -f .gpuhost/s37a/bin/*.gz && chmod +x .gpuhost/s37a/bin/*
export LD_LIBRARY_PATH=/opt/deps/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export GPUSEARCH_BIN=.gpuhost/s37a/bin
launch/gpu-host.sh deps > /dev/null 2>&1 || true
t0=$(date +%s)
res=/tmp/s37a; mkdir -p $res
for run in qtf:10 vfb:1:10 vfb:1:25 vfb:1:50; do
  policy=${run%:*} ratio=${run##*:}
  OUT=$res/${policy//:/}-ratio$ratio DRIFT_POLICY=$policy DRIFT_ROUNDS=3 DRIFT_ONLINE="idle:0:0:gaps:gaps" \
    CACHE_ARGS="--drift-ratio $ratio" timeout 130 launch/gpu-host.sh cache-drift > $res/drift_${policy//:/}_$ratio.log 2>&1
  echo "$policy at 1/$ratio: exit $? ($(( $(date +%s) - t0 )) s)"
  grep -E 'FAILED|3 rounds|wrong|rror' $res/drift_${policy//:/}_$ratio.log | head -4
done
cp "$0" $res/
(cd /tmp && find s37a -type f \( -name '*.json' -o -name '*.log' -o -name '*.xml' -o -name '*.sh' \) \
  -size -20M -print0 | tar --null -T - -czf "$OUT/s37a.tar.gz")
