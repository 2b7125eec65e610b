#!/usr/bin/env bash
# Session 30, call 3 (issue 16, merged main): the quantile aim (default 0.95) against session
# 29's aim (adaptive_mean), batch 64: CPU engine 1 and 4 ISNs (2 reps), GPU engine 1 ISN at
# batches 64 and 1,024 (1 rep).
set -u
export NCCL_NVLS_ENABLE=0
export GPUSEARCH_BIN=.gpuhost/s30-16/bin OVERHEAD_QUERIES=30000 OVERHEAD_LATENCY_REPS=0
OVERHEAD_ENGINES=cpu OVERHEAD_BATCHES=64 OVERHEAD_REPS=2 OVERHEAD_PROBE_REPS=0 \
  OVERHEAD_VARIANTS="adaptive_mean adaptive" timeout 170 launch/gpu-host.sh overhead
echo "overhead cpu exit $?"
OVERHEAD_ENGINES=gpu OVERHEAD_ISNS=1 OVERHEAD_REPS=1 OVERHEAD_PROBE_REPS=0 \
  OVERHEAD_VARIANTS="adaptive_mean adaptive adaptive_window" timeout 110 launch/gpu-host.sh overhead
echo "overhead gpu exit $?"
launch/gpu-host.sh pack > /dev/null
ls -la "$OUT"
