#!/usr/bin/env bash
# Session 50, call E (issue 16): the defaults at the end of session 50 (--admission-threads auto,
# --id-table huge-pages), one GPU host (16 cores), the binaries of call C (.gpuhost/s50c/bin).
# 1. GPU engine, batch 64, one ISN, 3 reps (targets 1 and 4).
# Carry: .gpuhost/s50-e.sh .gpuhost/s50c .gpuhost/rt-debs
set -u
source launch/device-env.sh .gpuhost/s50c/bin
device_results s50e
new=$(cd .gpuhost/s50c && pwd)
t0=$(date +%s)
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv > $res/nvidia-smi.txt 2>&1
nproc >> $res/nvidia-smi.txt
cat $res/nvidia-smi.txt
timeout 150 launch/bench-cluster-overhead.sh --out $res/gpu64 --build $new --engine gpu \
  --docs 1000000 --queries 240000 --batches 64 --isns "1" --reps 3 --split round-robin \
  --variants "adaptive" --probe-reps 0 --latency-reps 0 > $res/gpu64.log 2>&1
echo "gpu batch 64: exit $? ($(( $(date +%s) - t0 )) s)"; sed -n '/^variant /,/^in process/p' $res/gpu64.log
device_pack
ls -la "$OUT"
