#!/usr/bin/env bash
# Session 49, call D (issue 16), one GPU host (16 cores). The ISN's MPI thread now decodes the
# batches that wait for the engine and encodes every answer (--answer-thread mpi, the default), so
# that the engine thread goes from one batch's search straight to the next; variants "_engenc"
# (--answer-thread engine) are the ISN as before, in the same call. 1M documents, and-or, k 10,
# round-robin shards, 2 interleaved reps, against the in-process search of the same call.
# 1. CPU engine, batch 1,024 (240,000 queries), one ISN and four: the default and _engenc.
# 2. GPU engine, one ISN, batch 64 (240,000 queries): the default, _engenc, and the cut aimed at
#    the median compute (_q50: batches that arrive early now wait decoded).
# 3. CPU engine, batch 64 (30,000 queries), one ISN: the default, _engenc, _q50.
# Carry: .gpuhost/s49-d.sh .gpuhost/s49a .gpuhost/rt-debs
set -u
source launch/device-env.sh .gpuhost/s49a/bin
device_results s49d
new=$(cd .gpuhost/s49a && pwd)
t0=$(date +%s)
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv > $res/nvidia-smi.txt 2>&1
nproc >> $res/nvidia-smi.txt
cat $res/nvidia-smi.txt
timeout 230 launch/bench-cluster-overhead.sh --out $res/b1024 --build $new --engine cpu \
  --docs 1000000 --queries 240000 --batches 1024 --isns "1 4" --reps 2 --split round-robin \
  --variants "adaptive adaptive_engenc" --probe-reps 0 --latency-reps 0 > $res/b1024.log 2>&1
echo "cpu batch 1024: exit $? ($(( $(date +%s) - t0 )) s)"; sed -n '/^variant /,/^in process/p' $res/b1024.log
grep " rep " $res/b1024.log | tail -10
device_pack
timeout 150 launch/bench-cluster-overhead.sh --out $res/gpu64 --build $new --engine gpu \
  --index $res/b1024/index --queries 240000 --batches 64 --isns "1" --reps 2 --split round-robin \
  --variants "adaptive adaptive_engenc adaptive_q50" --probe-reps 0 --latency-reps 0 > $res/gpu64.log 2>&1
echo "gpu batch 64: exit $? ($(( $(date +%s) - t0 )) s)"; sed -n '/^variant /,/^in process/p' $res/gpu64.log
grep " rep " $res/gpu64.log | tail -8
device_pack
timeout 90 launch/bench-cluster-overhead.sh --out $res/b64 --build $new --engine cpu \
  --index $res/b1024/index --queries 30000 --batches 64 --isns "1" --reps 2 --split round-robin \
  --variants "adaptive adaptive_engenc adaptive_q50" --probe-reps 0 --latency-reps 0 > $res/b64.log 2>&1
echo "cpu batch 64: exit $? ($(( $(date +%s) - t0 )) s)"; sed -n '/^variant /,/^in process/p' $res/b64.log
grep " rep " $res/b64.log | tail -8
device_pack; ls -la "$OUT"
