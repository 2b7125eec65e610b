#!/usr/bin/env bash
# Session 32, call D (issue 16, four ISNs >= one ISN): the shared threshold re-read at every
# check (the default) against every 16 and every 64 checks (--share-refresh); CPU engine, batch
# 1,024, one and four ISNs, just in time, 3 reps.
set -u
export NCCL_NVLS_ENABLE=0 GPUSEARCH_BIN=.gpuhost/s32d/bin
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
export OVERHEAD_QUERIES=30000 OVERHEAD_LATENCY_REPS=0 OVERHEAD_PROBE_REPS=0
OVERHEAD_REPS=3 OVERHEAD_ENGINES=cpu OVERHEAD_BATCHES=1024 OVERHEAD_ISNS="1 4" \
  OVERHEAD_VARIANTS="adaptive adaptive_refresh16 adaptive_refresh64" \
  timeout 400 launch/gpu-host.sh overhead
echo "overhead cpu exit $?"
launch/gpu-host.sh pack > /dev/null 2>&1
ls -la "$OUT"
