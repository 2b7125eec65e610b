#!/usr/bin/env bash
# Session 31, call F: the list cache's batch planning with array look-ups (FlatTermMap, the
# directory's blocks by term): the GPU list-cache tests, then qtf drift offline against every
# plan, 3 rounds (planning time per call in the "call ms" lines).
set -u
export NCCL_NVLS_ENABLE=0 GPUSEARCH_BIN=.gpuhost/s31f/bin
GTEST_FILTER='GpuListCache*' timeout 90 launch/gpu-host.sh tests
echo "list-cache gpu tests exit $?"
DRIFT_POLICY=qtf DRIFT_ROUNDS=3 DRIFT_ONLINE="idle:0:0:gaps:gaps" \
  timeout 130 launch/gpu-host.sh cache-drift 2>&1 | grep -E 'drifting|call ms|wrong|PASSED|FAILED|ready'
echo "cache-drift exit $?"
launch/gpu-host.sh pack > /dev/null 2>&1
