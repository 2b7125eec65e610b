#!/usr/bin/env bash
# Session 33, call H. Issue 16 (four ISNs >= one ISN): the final defaults (AND phases first),
# CPU engine, batch 1,024, 60,000 queries, 4 reps.
set -u
export NCCL_NVLS_ENABLE=0 GPUSEARCH_BIN=.gpuhost/s33h/bin
export OVERHEAD_QUERIES=60000 OVERHEAD_LATENCY_REPS=0 OVERHEAD_PROBE_REPS=0
OVERHEAD_REPS=4 OVERHEAD_ENGINES=cpu OVERHEAD_BATCHES="1024" OVERHEAD_ISNS="1 4" \
  OVERHEAD_VARIANTS="adaptive" timeout 170 launch/gpu-host.sh overhead
echo "overhead cpu exit $?"
launch/gpu-host.sh pack > /dev/null 2>&1
