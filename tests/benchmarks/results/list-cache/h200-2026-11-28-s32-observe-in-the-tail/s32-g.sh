#!/usr/bin/env bash
# Session 32, call G (issue 10): the online policy sees a call's queries while its last launches
# run, not after the call; the list cache's GPU tests, then qtf drift, offline against every
# plan, 3 rounds.
set -u
export NCCL_NVLS_ENABLE=0 GPUSEARCH_BIN=.gpuhost/s32g/bin
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
# (the list cache's GPU tests passed in the first run of this call: 7 tests)

DRIFT_POLICY=qtf DRIFT_ROUNDS=3 DRIFT_ONLINE="idle:0:0:gaps:gaps" \
  timeout 200 launch/gpu-host.sh cache-drift 2>&1 | grep -E 'drifting|call ms|wrong|PASSED|FAILED|ready|done|rror|no '
echo "cache-drift exit $?"
launch/gpu-host.sh pack > /dev/null 2>&1
ls -la "$OUT"
