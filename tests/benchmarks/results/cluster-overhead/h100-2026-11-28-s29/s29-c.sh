#!/usr/bin/env bash
# Session 29, call 3 (issue 16): just-in-time admission aiming 0.2 compute after the finish,
# against 0.1 before it (about the first version) and the window; CPU then GPU engine.
set -u
export NCCL_NVLS_ENABLE=0
export GPUSEARCH_BIN=.gpuhost/s29/bin OVERHEAD_QUERIES=30000 OVERHEAD_PROBE_REPS=0 OVERHEAD_LATENCY_REPS=0
OVERHEAD_ENGINES=cpu OVERHEAD_REPS=2 \
  OVERHEAD_VARIANTS="adaptive adaptive_lead1 spin adaptive_window" \
  timeout 330 launch/gpu-host.sh overhead
echo "overhead cpu exit $?"
OVERHEAD_ENGINES=gpu OVERHEAD_REPS=1 OVERHEAD_VARIANTS="adaptive spin adaptive_window" \
  timeout 200 launch/gpu-host.sh overhead
echo "overhead gpu exit $?"
launch/gpu-host.sh pack > /dev/null
ls -la "$OUT"
