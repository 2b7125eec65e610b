#!/usr/bin/env bash
# Session 33, call B. Issue 16 (four ISNs >= one ISN): sharing ISNs' engine threads take a
# batch's queries in batch order (default) against TBB's range splitting (_anyorder), both with
# AND phases first; CPU engine, batches 1,024 and 64, 60,000 queries, 3 reps.
set -u
export NCCL_NVLS_ENABLE=0 GPUSEARCH_BIN=.gpuhost/s33b/bin
export OVERHEAD_QUERIES=60000 OVERHEAD_LATENCY_REPS=0 OVERHEAD_PROBE_REPS=0
OVERHEAD_REPS=3 OVERHEAD_ENGINES=cpu OVERHEAD_BATCHES="1024 64" OVERHEAD_ISNS="1 4" \
  OVERHEAD_VARIANTS="adaptive adaptive_anyorder" \
  timeout 400 launch/gpu-host.sh overhead
echo "overhead cpu exit $?"
launch/gpu-host.sh pack > /dev/null 2>&1
ls -la "$OUT"
