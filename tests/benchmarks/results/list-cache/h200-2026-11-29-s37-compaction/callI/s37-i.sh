#!/usr/bin/env bash
# Session 37, call H: every GPU test on the session's final GPU code (the list cache's
# compaction on the device, table shifts, uploads ordered on their kernels' stream, the legacy
# stream synchronized after pageable uploads in device_shard and the ranker), with the shared
# data (Cranfield, the MS MARCO sample) carried. Second run (call I): GpuRanker.* with gpusearch carried beside gpu_tests (call H lacked it: exit 127).
set -u
export NCCL_NVLS_ENABLE=0
gunzip -f .gpuhost/s37i/bin/*.gz && chmod +x .gpuhost/s37i/bin/*
export LD_LIBRARY_PATH=/opt/deps/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
GPUSEARCH_BIN=.gpuhost/s37i/bin launch/gpu-host.sh deps > /dev/null 2>&1 || true
res=/tmp/s37i; mkdir -p $res
t0=$(date +%s)
GPUSEARCH_SHARED_DATA=$PWD/.gpuhost/s37i/data timeout 120 .gpuhost/s37i/bin/gpu_tests --gtest_filter="GpuRanker.*" > $res/gpu_tests.log 2>&1
echo "gpu_tests: exit $? ($(( $(date +%s) - t0 )) s)"
grep -E "^\[  (PASSED|FAILED|SKIPPED) |^\[==========\]" $res/gpu_tests.log | head -12
cp "$0" $res/
tar -C /tmp -czf "$OUT/s37i.tar.gz" s37i
