#!/usr/bin/env bash
# Session 29, call 4 (issue 16): the final code (just in time, lag 0.2, admission ahead) against
# the window, CPU then GPU engine, 1 and 4 ISNs, batches 64 and 1,024; the fabric probe.
set -u
export NCCL_NVLS_ENABLE=0
export GPUSEARCH_BIN=.gpuhost/s29/bin OVERHEAD_QUERIES=30000 OVERHEAD_LATENCY_REPS=0
OVERHEAD_ENGINES=cpu OVERHEAD_REPS=2 OVERHEAD_PROBE_REPS=1 \
  OVERHEAD_VARIANTS="adaptive spin adaptive_window" timeout 300 launch/gpu-host.sh overhead
echo "overhead cpu exit $?"
OVERHEAD_ENGINES=gpu OVERHEAD_REPS=1 OVERHEAD_PROBE_REPS=0 \
  OVERHEAD_VARIANTS="adaptive spin adaptive_window" timeout 150 launch/gpu-host.sh overhead
echo "overhead gpu exit $?"
launch/gpu-host.sh pack > /dev/null
ls -la "$OUT"
