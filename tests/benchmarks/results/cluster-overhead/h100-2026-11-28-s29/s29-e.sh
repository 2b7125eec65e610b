#!/usr/bin/env bash
# Session 29, call 5 (issue 16): adaptive progress polling by yielding while hot (--hot-poll-us 0)
# against 20 us sleeps and spin, just in time; CPU then GPU engine.
set -u
export NCCL_NVLS_ENABLE=0
export GPUSEARCH_BIN=.gpuhost/s29/bin OVERHEAD_QUERIES=30000 OVERHEAD_LATENCY_REPS=0
OVERHEAD_ENGINES=cpu OVERHEAD_REPS=2 OVERHEAD_PROBE_REPS=1 \
  OVERHEAD_VARIANTS="adaptive adaptive_hot0 spin" timeout 200 launch/gpu-host.sh overhead
echo "overhead cpu exit $?"
OVERHEAD_ENGINES=gpu OVERHEAD_REPS=1 OVERHEAD_PROBE_REPS=0 \
  OVERHEAD_VARIANTS="adaptive adaptive_hot0" timeout 80 launch/gpu-host.sh overhead
echo "overhead gpu exit $?"
launch/gpu-host.sh pack > /dev/null
ls -la "$OUT"
