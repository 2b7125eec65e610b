#!/usr/bin/env bash
# Session 30, call 1 (issue 10): online plans swapped in between calls (--cache-swap gaps)
# against inside the next call, on the drifting log at 10x; every GPU test first.
set -u
export NCCL_NVLS_ENABLE=0
nproc; nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
export GPUSEARCH_BIN=.gpuhost/s30/bin
timeout 220 launch/gpu-host.sh tests
echo "tests exit $?"
DRIFT_ROUNDS=5 timeout 330 launch/gpu-host.sh cache-drift
echo "cache-drift exit $?"
launch/gpu-host.sh pack > /dev/null
ls -la "$OUT"
