#!/usr/bin/env bash
# Session 30, call 2 (issue 10): the gated online policy with the re-plan back-off (as shipped)
# against without it (call 1's), and every plan taken; swaps between calls; 5 rounds.
set -u
export NCCL_NVLS_ENABLE=0
nproc; nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
export GPUSEARCH_BIN=.gpuhost/s30/bin
DRIFT_ROUNDS=5 DRIFT_ONLINE="idle:1:0.02:gaps:gaps:8,idle:1:0.02:gaps:gaps:1,idle:0:0:gaps:gaps:8" \
  timeout 400 launch/gpu-host.sh cache-drift
echo "cache-drift exit $?"
launch/gpu-host.sh pack > /dev/null
ls -la "$OUT"
