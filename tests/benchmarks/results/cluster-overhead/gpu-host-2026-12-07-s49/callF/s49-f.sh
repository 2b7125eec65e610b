#!/usr/bin/env bash
# Session 49, call F (issue 16), one GPU host (16 cores): the new defaults (the ISN's MPI thread
# decodes waiting batches and encodes answers; the just-in-time cut aimed at the 0.7 quantile of
# compute) against the aim before (_q95), same call, 1M documents, and-or, k 10, round-robin
# shards, interleaved reps, against the in-process search of the same call.
# 1. GPU engine, one ISN, batch 64 (240,000 queries), 3 reps.
# 2. CPU engine, one ISN, batch 64 (30,000 queries), 3 reps.
# 3. CPU engine, batch 1,024 (240,000 queries), one ISN and four, 2 reps; _ahead too.
# Carry: .gpuhost/s49-f.sh .gpuhost/s49b .gpuhost/rt-debs
set -u
source launch/device-env.sh .gpuhost/s49b/bin
device_results s49f
new=$(cd .gpuhost/s49b && pwd)
t0=$(date +%s)
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv > $res/nvidia-smi.txt 2>&1
nproc >> $res/nvidia-smi.txt
cat $res/nvidia-smi.txt
timeout 200 launch/bench-cluster-overhead.sh --out $res/gpu64 --build $new --engine gpu \
  --docs 1000000 --queries 240000 --batches 64 --isns "1" --reps 3 --split round-robin \
  --variants "adaptive adaptive_q95" --probe-reps 0 --latency-reps 0 > $res/gpu64.log 2>&1
echo "gpu batch 64: exit $? ($(( $(date +%s) - t0 )) s)"; sed -n '/^variant /,/^in process/p' $res/gpu64.log
grep " rep " $res/gpu64.log | tail -6
device_pack
timeout 60 launch/bench-cluster-overhead.sh --out $res/b64 --build $new --engine cpu \
  --index $res/gpu64/index --queries 30000 --batches 64 --isns "1" --reps 3 --split round-robin \
  --variants "adaptive adaptive_q95" --probe-reps 0 --latency-reps 0 > $res/b64.log 2>&1
echo "cpu batch 64: exit $? ($(( $(date +%s) - t0 )) s)"; sed -n '/^variant /,/^in process/p' $res/b64.log
grep " rep " $res/b64.log | tail -6
device_pack
timeout 170 launch/bench-cluster-overhead.sh --out $res/b1024 --build $new --engine cpu \
  --index $res/gpu64/index --queries 240000 --batches 1024 --isns "1 4" --reps 2 --split round-robin \
  --variants "adaptive adaptive_q95 adaptive_ahead" --probe-reps 0 --latency-reps 0 > $res/b1024.log 2>&1
echo "cpu batch 1024: exit $? ($(( $(date +%s) - t0 )) s)"; sed -n '/^variant /,/^in process/p' $res/b1024.log
grep " rep " $res/b1024.log | tail -12
python3 launch/summarize-isn-scaling.py $res/b1024/runs 2>&1 | tail -5
device_pack; ls -la "$OUT"
