#!/usr/bin/env bash
# Session 30, call 4 (issue 16): the cut model's compute is now the ISN engine thread's
# occupancy (engine + encoding the answer); quantile aim 0.95 (default) against session 29's
# mean aim, GPU engine 1 ISN batches 64 and 1,024 (2 reps), CPU engine 4 ISNs batch 64 (1 rep).
set -u
export NCCL_NVLS_ENABLE=0
export GPUSEARCH_BIN=.gpuhost/s30-16/bin OVERHEAD_QUERIES=30000 OVERHEAD_LATENCY_REPS=0
OVERHEAD_ENGINES=gpu OVERHEAD_ISNS=1 OVERHEAD_REPS=2 OVERHEAD_PROBE_REPS=0 \
  OVERHEAD_VARIANTS="adaptive_mean adaptive" timeout 100 launch/gpu-host.sh overhead
echo "overhead gpu exit $?"
OVERHEAD_ENGINES=cpu OVERHEAD_BATCHES=64 OVERHEAD_REPS=2 OVERHEAD_PROBE_REPS=0 \
  OVERHEAD_VARIANTS="adaptive_mean adaptive" timeout 110 launch/gpu-host.sh overhead
echo "overhead cpu exit $?"
launch/gpu-host.sh pack > /dev/null
ls -la "$OUT"
