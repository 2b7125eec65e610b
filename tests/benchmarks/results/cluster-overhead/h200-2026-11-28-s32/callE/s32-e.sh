#!/usr/bin/env bash
# Session 32, call E (issue 16, four ISNs >= one ISN): the slot in a cache line of its own, apart
# from its union; the shared threshold re-read every 16 checks (the new default) against every
# check and every 4; and without unions. CPU engine, batch 1,024, one and four ISNs, just in
# time, 3 reps.
set -u
export NCCL_NVLS_ENABLE=0 GPUSEARCH_BIN=.gpuhost/s32e/bin
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
export OVERHEAD_QUERIES=30000 OVERHEAD_LATENCY_REPS=0 OVERHEAD_PROBE_REPS=0
OVERHEAD_REPS=3 OVERHEAD_ENGINES=cpu OVERHEAD_BATCHES=1024 OVERHEAD_ISNS="1 4" \
  OVERHEAD_VARIANTS="adaptive adaptive_refresh1 adaptive_refresh4 adaptive_nounion" \
  timeout 450 launch/gpu-host.sh overhead
echo "overhead cpu exit $?"
launch/gpu-host.sh pack > /dev/null 2>&1
ls -la "$OUT"
