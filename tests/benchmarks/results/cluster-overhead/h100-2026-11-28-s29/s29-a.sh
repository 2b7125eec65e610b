#!/usr/bin/env bash
# Session 29, call 1 (issue 16): just-in-time admission against the window, CPU and GPU engines,
# 1 and 4 ISNs, batches 64 and 1,024, on the 1M-document synthetic index.
set -u
export NCCL_NVLS_ENABLE=0
nproc; nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
export GPUSEARCH_BIN=.gpuhost/s29/bin OVERHEAD_ENGINES="cpu gpu" OVERHEAD_REPS=2 \
  OVERHEAD_QUERIES=10000 OVERHEAD_PROBE_REPS=1 OVERHEAD_LATENCY_REPS=1 \
  OVERHEAD_VARIANTS="adaptive adaptive_window spin spin_window"
timeout 530 launch/gpu-host.sh overhead
echo "overhead exit $?"
for e in cpu gpu; do
  sed -n '/^closed-loop latency/,/^p50\/compute/p' "$OUT/overhead_$e.log" | sed "s/^/latency $e: /"
done
launch/gpu-host.sh pack > /dev/null
ls -la "$OUT"
