#!/usr/bin/env bash
# Session 30, call 5: every GPU test on the session's final code.
set -u
export GPUSEARCH_BIN=.gpuhost/s30/bin
nvidia-smi --query-gpu=name --format=csv,noheader
timeout 170 launch/gpu-host.sh tests
echo "tests exit $?"
