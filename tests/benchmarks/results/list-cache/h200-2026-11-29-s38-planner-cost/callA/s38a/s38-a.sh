#!/usr/bin/env bash
# Prepared in session 37 for the next device call (issue 10): vfb's online planner cut to a
# third by the merged admission and the replay memo (build machine, 2.5M documents, the whole
# drifting log: planning 0.54 s against 2.92 s, replay 1.12 s against 2.04-2.35 s, the same
# plans). Does it move the vfb online arm's busy rate at 1/10 (calls G and J: 0.956, 0.982)?
# vfb:1 at 1/10, 5 rounds, every plan; then the list cache's GPU tests. Before it: build, strip
# and gzip gpusearch, gpu_tests and bench_list_cache into .gpuhost/s38a/bin; copy this script to
# .gpuhost/s38-a.sh; carry .deps, .gpuhost/s38a and it. About 3 minutes on the H200.
set -u
export NCCL_NVLS_ENABLE=0
gunzip -f .gpuhost/s38a/bin/*.gz && chmod +x .gpuhost/s38a/bin/*
export LD_LIBRARY_PATH=/opt/deps/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export GPUSEARCH_BIN=.gpuhost/s38a/bin
launch/gpu-host.sh deps > /dev/null 2>&1 || true
t0=$(date +%s)
res=/tmp/s38a; mkdir -p $res
timeout 240 .gpuhost/s38a/bin/gpu_tests --gtest_filter='GpuListCache*' > $res/gpu_list_cache_tests.log 2>&1
echo "GpuListCache tests: exit $? ($(( $(date +%s) - t0 )) s)"
grep -E '^\[  (PASSED|FAILED|SKIPPED) ' $res/gpu_list_cache_tests.log
OUT=$res/vfb1-ratio10 DRIFT_POLICY=vfb:1 DRIFT_ROUNDS=5 DRIFT_ONLINE="idle:0:0:gaps:gaps" \
  CACHE_ARGS="--drift-ratio 10" timeout 240 launch/gpu-host.sh cache-drift > $res/drift_vfb1_10.log 2>&1
echo "vfb:1 at 1/10: exit $? ($(( $(date +%s) - t0 )) s)"
grep -E 'rounds:|online policy' $res/vfb1-ratio10/cache_drift.log | cut -c1-240
cp "$0" $res/
tar -C /tmp -czf "$OUT/s38a.tar.gz" s38a
