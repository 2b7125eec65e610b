#!/usr/bin/env bash
# Session 32, call F. Every GPU test on this session's code; issue 16 (four ISNs >= one ISN):
# engine threads per ISN, 4 (cores / ISNs, the default) against 5, 6 and 8 (oversubscribed: an
# ISN ahead of the others leaves its cores to the slowest); CPU engine, batch 1,024, 3 reps.
set -u
export NCCL_NVLS_ENABLE=0 GPUSEARCH_BIN=.gpuhost/s32f/bin
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
timeout 200 launch/gpu-host.sh tests
echo "tests exit $?"
export OVERHEAD_QUERIES=30000 OVERHEAD_LATENCY_REPS=0 OVERHEAD_PROBE_REPS=0
OVERHEAD_REPS=3 OVERHEAD_ENGINES=cpu OVERHEAD_BATCHES=1024 OVERHEAD_ISNS="1 4" \
  OVERHEAD_VARIANTS="adaptive adaptive_threads5 adaptive_threads6 adaptive_threads8" \
  timeout 330 launch/gpu-host.sh overhead
echo "overhead cpu exit $?"
launch/gpu-host.sh pack > /dev/null 2>&1
ls -la "$OUT"
