#!/usr/bin/env bash
# Session 37, call C (issue 10): rebuilds that compact the region on the device (relocations)
# instead of copying it again from the host. The list cache's GPU tests (the new
# ARebuildMovesTheKeptListsOnTheDeviceAndStaysExact among them), then the drift at 1/10 for
# vfb:1 (5 rounds; call A gave 0.886 with rebuilds copying 1.8 GB from the host) and qtf, and
# vfb:1 at 1/25 (3 rounds).
set -u
export NCCL_NVLS_ENABLE=0
gunzip -f .gpuhost/s37c/bin/*.gz && chmod +x .gpuhost/s37c/bin/*
export LD_LIBRARY_PATH=/opt/deps/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export GPUSEARCH_BIN=.gpuhost/s37c/bin
launch/gpu-host.sh deps > /dev/null 2>&1 || true
t0=$(date +%s)
res=/tmp/s37c; mkdir -p $res
timeout 240 .gpuhost/s37c/bin/gpu_tests --gtest_filter='GpuListCache*' > $res/gpu_list_cache_tests.log 2>&1
echo "GpuListCache tests: exit $? ($(( $(date +%s) - t0 )) s)"
grep -E '^\[  (PASSED|FAILED|SKIPPED) ' $res/gpu_list_cache_tests.log
for run in vfb:1:10:5 qtf:10:3 vfb:1:25:3; do
  rounds=${run##*:}; rest=${run%:*}; policy=${rest%:*} ratio=${rest##*:}
  OUT=$res/${policy//:/}-ratio$ratio DRIFT_POLICY=$policy DRIFT_ROUNDS=$rounds DRIFT_ONLINE="idle:0:0:gaps:gaps" \
    CACHE_ARGS="--drift-ratio $ratio" timeout 150 launch/gpu-host.sh cache-drift > $res/drift_${policy//:/}_$ratio.log 2>&1
  echo "$policy at 1/$ratio: exit $? ($(( $(date +%s) - t0 )) s)"
  grep -E 'rounds:|swaps:' $res/drift_${policy//:/}_$ratio.log | head -4
  grep -hE '^drifting log at' $res/${policy//:/}-ratio$ratio/cache_drift.log | grep -v rounds | awk '{print $6, $7, $8}' | paste -sd' ' | head -c 600; echo
done
cp "$0" $res/
(cd /tmp && find s37c -type f \( -name '*.json' -o -name '*.log' -o -name '*.xml' -o -name '*.sh' \) \
  -size -20M -print0 | tar --null -T - -czf "$OUT/s37c.tar.gz")
