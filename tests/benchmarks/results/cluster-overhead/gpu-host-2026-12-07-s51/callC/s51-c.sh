#!/usr/bin/env bash
# Session 51, call C (issue 16), one GPU host (16 cores). Binaries: .gpuhost/s51c (9857d7d: the
# admission resolver's own helpers, woken before each batch's admission, auto 2 threads at batch
# 64 on 8+ cores; the batcher's one-batch cut; the batch encoded from views; with gpu_tests) and
# .gpuhost/s50f (`_old`: session 50's final aggregator and ISN, the resolver on the MPI thread
# alone below 128 queries, a oneTBB arena above).
# 0. Every GPU test.
# 1. GPU engine, batch 64, one ISN: the default against `_admit1` (this tree, the MPI thread
#    alone) and `_old`, 3 reps (targets 1 and 4).
# 2. CPU engine, batch 1,024, one ISN and four: the default (4 threads: 3 helpers) against
#    `_old` (a 4-thread oneTBB arena), 2 reps, as time allows (targets 1 and 2).
# Carry: .gpuhost/s51-c.sh .gpuhost/s51c .gpuhost/s50f .gpuhost/rt-debs .gpuhost/data
set -u
source launch/device-env.sh .gpuhost/s51c/bin .gpuhost/s50f/bin
device_results s51c
new=$(cd .gpuhost/s51c && pwd)
old=$(cd .gpuhost/s50f && pwd)
t0=$(date +%s)
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv > $res/nvidia-smi.txt 2>&1
nproc >> $res/nvidia-smi.txt
cat $res/nvidia-smi.txt
GPUSEARCH_SHARED_DATA=$PWD/.gpuhost/data timeout 150 $GPUSEARCH_BIN/gpu_tests > $res/gpu_tests.log 2>&1
echo "gpu_tests: exit $? ($(( $(date +%s) - t0 )) s)"; grep -E "^\[  (PASSED|FAILED|SKIPPED) " $res/gpu_tests.log | head
device_pack
timeout 210 launch/bench-cluster-overhead.sh --out $res/gpu64 --build $new --before $old --engine gpu \
  --docs 1000000 --queries 160000 --batches 64 --isns "1" --reps 3 --split round-robin \
  --variants "adaptive adaptive_admit1 adaptive_old" --probe-reps 0 --latency-reps 0 > $res/gpu64.log 2>&1
echo "gpu batch 64: exit $? ($(( $(date +%s) - t0 )) s)"; sed -n '/^variant /,/^in process/p' $res/gpu64.log
device_pack
left=$(( 575 - ($(date +%s) - t0) ))
timeout $left launch/bench-cluster-overhead.sh --out $res/b1024 --build $new --before $old --engine cpu \
  --index $res/gpu64/index --queries 240000 --batches 1024 --isns "1 4" --reps 2 --split round-robin \
  --variants "adaptive adaptive_old" --probe-reps 0 --latency-reps 0 > $res/b1024.log 2>&1
echo "cpu batch 1024: exit $? ($(( $(date +%s) - t0 )) s, limit $left)"; sed -n '/^variant /,/^in process/p' $res/b1024.log
python3 launch/summarize-isn-scaling.py $res/b1024/runs 2>&1 | tail -3
device_pack; ls -la "$OUT"
