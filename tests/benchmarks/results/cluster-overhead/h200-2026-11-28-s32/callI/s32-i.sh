#!/usr/bin/env bash
# Session 32, call I (issue 16): the final code's defaults at batch 64: CPU engine at one and four
# ISNs, GPU engine at one ISN, 2 reps.
set -u
export NCCL_NVLS_ENABLE=0 GPUSEARCH_BIN=.gpuhost/s32i/bin
export OVERHEAD_QUERIES=30000 OVERHEAD_LATENCY_REPS=0 OVERHEAD_PROBE_REPS=0 OVERHEAD_REPS=2
OVERHEAD_ENGINES=cpu OVERHEAD_BATCHES=64 OVERHEAD_ISNS="1 4" OVERHEAD_VARIANTS="adaptive" \
  timeout 100 launch/gpu-host.sh overhead
echo "overhead cpu exit $?"
OVERHEAD_ENGINES=gpu OVERHEAD_BATCHES=64 OVERHEAD_ISNS=1 OVERHEAD_VARIANTS="adaptive" \
  timeout 60 launch/gpu-host.sh overhead
echo "overhead gpu exit $?"
launch/gpu-host.sh pack > /dev/null 2>&1
