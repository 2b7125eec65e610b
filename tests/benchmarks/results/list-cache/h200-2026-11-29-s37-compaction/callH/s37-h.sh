#!/usr/bin/env bash
# Session 37, call H: every GPU test on the session's final GPU code (the list cache's
# compaction on the device, table shifts, uploads ordered on their kernels' stream, the legacy
# stream synchronized after pageable uploads in device_shard and the ranker), with the shared
# data (Cranfield, the MS MARCO sample) carried.
set -u
export NCCL_NVLS_ENABLE=0
gunzip -f .gpuhost/s37h/bin/*.gz && chmod +x .gpuhost/s37h/bin/*
export LD_LIBRARY_PATH=/opt/deps/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
GPUSEARCH_BIN=.gpuhost/s37h/bin launch/gpu-host.sh deps > /dev/null 2>&1 || true
res=/tmp/s37h; mkdir -p $res
t0=$(date +%s)
GPUSEARCH_SHARED_DATA=$PWD/.gpuhost/s37h/data timeout 400 .gpuhost/s37h/bin/gpu_tests > $res/gpu_tests.log 2>&1
echo "gpu_tests: exit $? ($(( $(date +%s) - t0 )) s)"
grep -E "^\[  (PASSED|FAILED|SKIPPED) |^\[==========\]" $res/gpu_tests.log | head -12
cp "$0" $res/
tar -C /tmp -czf "$OUT/s37h.tar.gz" s37h
