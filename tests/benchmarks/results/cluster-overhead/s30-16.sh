#!/usr/bin/env bash
# Session 30 (issue 16, branch issue-16-s30): just-in-time admission aimed at the 95th
# percentile of the slowest ISN's compute over the last 64 batches (the new default,
# --admission-quantile 0.95; "adaptive_q90": 0.9) against session 29's aim (the mean compute
# plus 0.2 of it: variant "adaptive_mean" = --admission-quantile 0 --admission-lag 0.2),
# interleaved in the same call.
# CPU engine: 1 and 4 ISNs, batches 64 and 1,024, 2 reps; GPU engine: 1 ISN, both batches, 2 reps.
# Read the p50/c column (target <= 1.3 at batch 64) and q/s against in process.
# Binaries: this branch's gpusearch, gpusearch-aggregator and gpusearch-isn, built with CUDA on
# the build machine, in .gpuhost/s30-16/bin (carry .gpuhost/s30-16 and .deps; .gpuhost/s30 is
# issue 10's). About 4-5 minutes (the CPU part took 106 s for 24 runs and the 1M-document index
# on an H200 host's 16 cores).
set -u
export NCCL_NVLS_ENABLE=0
export GPUSEARCH_BIN=.gpuhost/s30-16/bin OVERHEAD_QUERIES=30000 OVERHEAD_LATENCY_REPS=0
OVERHEAD_ENGINES=cpu OVERHEAD_REPS=2 OVERHEAD_PROBE_REPS=0 \
  OVERHEAD_VARIANTS="adaptive_mean adaptive_q90 adaptive" timeout 210 launch/gpu-host.sh overhead
echo "overhead cpu exit $?"
OVERHEAD_ENGINES=gpu OVERHEAD_ISNS=1 OVERHEAD_REPS=2 OVERHEAD_PROBE_REPS=0 \
  OVERHEAD_VARIANTS="adaptive_mean adaptive" timeout 120 launch/gpu-host.sh overhead
echo "overhead gpu exit $?"
launch/gpu-host.sh pack > /dev/null
ls -la "$OUT"
