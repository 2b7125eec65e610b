#!/usr/bin/env bash
# Session 32, call C (issue 16, four ISNs >= one ISN): the shards share each query's best scores
# (--share-unions on, the new default) against the slots alone (_nounion); CPU engine, batch
# 1,024, one and four ISNs, just in time and window admission, 3 reps.
set -u
export NCCL_NVLS_ENABLE=0 GPUSEARCH_BIN=.gpuhost/s32c/bin
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
export OVERHEAD_QUERIES=30000 OVERHEAD_LATENCY_REPS=0 OVERHEAD_PROBE_REPS=0
OVERHEAD_REPS=3 OVERHEAD_ENGINES=cpu OVERHEAD_BATCHES=1024 OVERHEAD_ISNS="1 4" \
  OVERHEAD_VARIANTS="adaptive adaptive_nounion adaptive_window adaptive_window_nounion" \
  timeout 400 launch/gpu-host.sh overhead
echo "overhead cpu exit $?"
launch/gpu-host.sh pack > /dev/null 2>&1
ls -la "$OUT"
