#!/usr/bin/env bash
# Session 33, call A. Every GPU test on this session's start (first check of the XGBoost-linked
# binaries on the host); issue 16 (four ISNs >= one ISN): and-or sharing ISNs run every query's
# AND phase before any OR phase (default) against the per-query order (_perquery), CPU engine,
# batches 1,024 and 64, 60,000 queries, 3 reps.
set -u
export NCCL_NVLS_ENABLE=0 GPUSEARCH_BIN=.gpuhost/s33a/bin
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
timeout 220 launch/gpu-host.sh tests
echo "tests exit $?"
export OVERHEAD_QUERIES=60000 OVERHEAD_LATENCY_REPS=0 OVERHEAD_PROBE_REPS=0
OVERHEAD_REPS=3 OVERHEAD_ENGINES=cpu OVERHEAD_BATCHES="1024 64" OVERHEAD_ISNS="1 4" \
  OVERHEAD_VARIANTS="adaptive adaptive_perquery" \
  timeout 330 launch/gpu-host.sh overhead
echo "overhead cpu exit $?"
launch/gpu-host.sh pack > /dev/null 2>&1
ls -la "$OUT"
