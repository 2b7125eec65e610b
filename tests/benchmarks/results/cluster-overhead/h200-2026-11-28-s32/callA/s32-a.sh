#!/usr/bin/env bash
# Session 32, call A. Every GPU test (first full run after session 31's list-cache array look-ups);
# issue 16 after session 31's admission dictionary, id prefetch and merge-lag admission: the CPU
# engine at batch 1,024 at 1 and 4 ISNs, then the GPU engine at one ISN, batch 64 (3 reps).
set -u
export NCCL_NVLS_ENABLE=0 GPUSEARCH_BIN=.gpuhost/s32a/bin
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
timeout 200 launch/gpu-host.sh tests
echo "tests exit $?"
export OVERHEAD_QUERIES=30000 OVERHEAD_LATENCY_REPS=0 OVERHEAD_PROBE_REPS=0 OVERHEAD_REPS=3
OVERHEAD_ENGINES=cpu OVERHEAD_BATCHES=1024 OVERHEAD_ISNS="1 4" \
  OVERHEAD_VARIANTS="adaptive" timeout 130 launch/gpu-host.sh overhead
echo "overhead cpu exit $?"
OVERHEAD_ENGINES=gpu OVERHEAD_BATCHES=64 OVERHEAD_ISNS=1 \
  OVERHEAD_VARIANTS="adaptive" timeout 110 launch/gpu-host.sh overhead
echo "overhead gpu exit $?"
launch/gpu-host.sh pack > /dev/null 2>&1
ls -la "$OUT"
