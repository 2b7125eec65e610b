#!/usr/bin/env bash
# Session 48, call C (issue 16), one GPU host (16 cores), CPU engine, batch 1,024 (1M documents,
# 240,000 queries, and-or, round-robin shards), one ISN and four, 2 interleaved reps: call B found
# one ISN at 87% of the in-process search (which now overlaps its writing with the engines),
# the ISN idle ~1.9 ms of a 15 ms cycle under just in time. The cut's aim at the median compute
# (--admission-quantile 0.5) and window admission against the default (0.95).
# Carry: .gpuhost/s48-c.sh .gpuhost/s48a .gpuhost/rt-debs
set -u
source launch/device-env.sh .gpuhost/s48a/bin
device_results s48c
new=$(cd .gpuhost/s48a && pwd)
t0=$(date +%s)
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv > $res/nvidia-smi.txt 2>&1
nproc >> $res/nvidia-smi.txt
timeout 235 launch/bench-cluster-overhead.sh --out $res/b1024 --build $new --engine cpu \
  --docs 1000000 --queries 240000 --batches 1024 --isns "1 4" --reps 2 --split round-robin \
  --variants "adaptive adaptive_q50 adaptive_window" --probe-reps 0 --latency-reps 0 > $res/b1024.log 2>&1
echo "batch 1024: exit $? ($(( $(date +%s) - t0 )) s)"; sed -n '/^variant /,/^in process/p' $res/b1024.log
grep " rep " $res/b1024.log | tail -14
device_pack; ls -la "$OUT"
