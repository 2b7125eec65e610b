#!/usr/bin/env bash
# Session 31, call E (issue 10): qtf drift, 5 rounds: every plan at sample 1 and 4, the gate at
# sample 4, against the offline plan.
set -u
export NCCL_NVLS_ENABLE=0 GPUSEARCH_BIN=.gpuhost/s31e/bin
DRIFT_POLICY=qtf DRIFT_ROUNDS=5 \
  DRIFT_ONLINE="idle:0:0:gaps:gaps:8:4,idle:0:0:gaps:gaps,idle:1:0.02:gaps:gaps:8:4" \
  timeout 260 launch/gpu-host.sh cache-drift
echo "cache-drift exit $?"
launch/gpu-host.sh pack > /dev/null 2>&1
ls -la "$OUT"
