#!/usr/bin/env bash
# Session 31, call D. Every GPU test on this session's GPU code; issue 16: the GPU engine at one
# ISN, batch 64, progress adaptive / spin / eager answers (2 reps), and the CPU engine at batch
# 1,024, 1 and 4 ISNs, with and without the node's combined K-th seeds (2 reps); issue 10: where
# the online arms' calls go (qtf; planning / finishing / observe split), machinery-only arms at
# sample 1 and 4.
set -u
export NCCL_NVLS_ENABLE=0 GPUSEARCH_BIN=.gpuhost/s31d/bin
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
timeout 200 launch/gpu-host.sh tests
echo "tests exit $?"
export OVERHEAD_QUERIES=30000 OVERHEAD_LATENCY_REPS=0 OVERHEAD_PROBE_REPS=0 OVERHEAD_REPS=2
OVERHEAD_ENGINES=cpu OVERHEAD_BATCHES=1024 OVERHEAD_ISNS="1 4" \
  OVERHEAD_VARIANTS="adaptive adaptive_noseed" timeout 130 launch/gpu-host.sh overhead
echo "overhead cpu exit $?"
OVERHEAD_ENGINES=gpu OVERHEAD_BATCHES=64 OVERHEAD_ISNS=1 \
  OVERHEAD_VARIANTS="adaptive spin adaptive_eager spin_eager" timeout 110 launch/gpu-host.sh overhead
echo "overhead gpu exit $?"
DRIFT_POLICY=qtf DRIFT_ROUNDS=3 \
  DRIFT_ONLINE="idle:0:0:gaps:gaps,idle:1e12:1e9:gaps:gaps,idle:1e12:1e9:gaps:gaps:8:4" \
  timeout 165 launch/gpu-host.sh cache-drift
echo "cache-drift exit $?"
launch/gpu-host.sh pack > /dev/null 2>&1
ls -la "$OUT"
