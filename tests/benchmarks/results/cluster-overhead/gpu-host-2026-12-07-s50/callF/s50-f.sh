#!/usr/bin/env bash
# Session 50, call F (issue 16): the admission's resolving with its prefetch rounds apart from
# the tokenizing, the record's second line asked for, and the terms' dfs in the dictionary's own
# array in huge pages (.gpuhost/s50f) against the same tree before that change (.gpuhost/s50c,
# `_old`), one GPU host (16 cores). GPU engine, batch 64, one ISN, 2 reps (targets 1 and 4).
# Carry: .gpuhost/s50-f.sh .gpuhost/s50f .gpuhost/s50c .gpuhost/rt-debs
set -u
source launch/device-env.sh .gpuhost/s50f/bin .gpuhost/s50c/bin
device_results s50f
new=$(cd .gpuhost/s50f && pwd)
old=$(cd .gpuhost/s50c && pwd)
t0=$(date +%s)
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv > $res/nvidia-smi.txt 2>&1
nproc >> $res/nvidia-smi.txt
cat $res/nvidia-smi.txt
timeout 130 launch/bench-cluster-overhead.sh --out $res/gpu64 --build $new --before $old --engine gpu \
  --docs 1000000 --queries 160000 --batches 64 --isns "1" --reps 2 --split round-robin \
  --variants "adaptive adaptive_old" --probe-reps 0 --latency-reps 0 > $res/gpu64.log 2>&1
echo "gpu batch 64: exit $? ($(( $(date +%s) - t0 )) s)"; sed -n '/^variant /,/^in process/p' $res/gpu64.log
device_pack
ls -la "$OUT"
