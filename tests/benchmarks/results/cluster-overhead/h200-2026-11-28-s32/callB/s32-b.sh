#!/usr/bin/env bash
# Session 32, call B (issue 16): hot hand-offs (--handoff hot, the new default) against the
# condition variable (--handoff sleep): the GPU engine at one ISN, batch 64 (4 reps), and the CPU
# engine at batch 64, one and four ISNs (2 reps).
set -u
export NCCL_NVLS_ENABLE=0 GPUSEARCH_BIN=.gpuhost/s32b/bin
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
export OVERHEAD_QUERIES=30000 OVERHEAD_LATENCY_REPS=0 OVERHEAD_PROBE_REPS=0
OVERHEAD_REPS=2 OVERHEAD_ENGINES=cpu OVERHEAD_BATCHES=64 OVERHEAD_ISNS="1 4" \
  OVERHEAD_VARIANTS="adaptive adaptive_sleephand" timeout 200 launch/gpu-host.sh overhead
echo "overhead cpu exit $?"
OVERHEAD_REPS=4 OVERHEAD_ENGINES=gpu OVERHEAD_BATCHES=64 OVERHEAD_ISNS=1 \
  OVERHEAD_VARIANTS="adaptive adaptive_sleephand" timeout 150 launch/gpu-host.sh overhead
echo "overhead gpu exit $?"
launch/gpu-host.sh pack > /dev/null 2>&1
ls -la "$OUT"
