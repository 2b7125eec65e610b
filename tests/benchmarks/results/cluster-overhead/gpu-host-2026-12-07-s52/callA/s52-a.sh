#!/usr/bin/env bash
# Prepared in session 51 for the next device call (issue 16), one GPU host (16 cores), about 7
# minutes. Binaries packed (strip, xz -9e) into .gpuhost/s52a/bin: gpusearch, gpusearch-aggregator,
# gpusearch-isn of main (session 51's end or later). Carry: .gpuhost/s52-a.sh .gpuhost/s52a
# .gpuhost/rt-debs (park results/cluster-overhead/h200-2026-11-29-s4[0-6], h200-2026-11-30-s47,
# gpu-host-2026-12-07-s4[89] and results/scheduler/h200-2026-11-28-s34 outside the tree for the
# call: the 64 MiB limit).
# 1. GPU engine, batch 64, one ISN: the default (the MPI thread alone) against `_admit2` (the MPI
#    thread and one helper polling with pauses from 30 us before the expected batch), 3 reps with
#    the default first, then 2 reps with `_admit2` first. Session 51's call C (helpers polling by
#    sched_yield, run first in every rep) cut a query's wait for its cut by about 25 us but the
#    p50 stayed (the ISN computed longer in those runs). If `_admit2`'s p50 is lower in both
#    orders, make 2 the auto value below 128 queries (AdmissionResolver::auto_threads).
# 2. CPU engine, batch 1,024, one ISN and four, 2 reps: the defaults (4 threads: the MPI thread
#    and 3 helpers; targets 1 and 2).
set -u
source launch/device-env.sh .gpuhost/s52a/bin
device_results s52a
new=$(cd .gpuhost/s52a && pwd)
t0=$(date +%s)
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv > $res/nvidia-smi.txt 2>&1
nproc >> $res/nvidia-smi.txt
cat $res/nvidia-smi.txt
GPUSEARCH_SHARED_DATA=$PWD/.gpuhost/data timeout 150 $GPUSEARCH_BIN/gpu_tests > $res/gpu_tests.log 2>&1
echo "gpu_tests: exit $? ($(( $(date +%s) - t0 )) s)"; grep -E "^\[  (PASSED|FAILED|SKIPPED) " $res/gpu_tests.log | head
device_pack
timeout 170 launch/bench-cluster-overhead.sh --out $res/gpu64 --build $new --engine gpu \
  --docs 1000000 --queries 160000 --batches 64 --isns "1" --reps 3 --split round-robin \
  --variants "adaptive adaptive_admit2" --probe-reps 0 --latency-reps 0 > $res/gpu64.log 2>&1
echo "gpu batch 64, default first: exit $? ($(( $(date +%s) - t0 )) s)"; sed -n '/^variant /,/^in process/p' $res/gpu64.log
device_pack
timeout 100 launch/bench-cluster-overhead.sh --out $res/gpu64r --build $new --engine gpu \
  --index $res/gpu64/index --queries 160000 --batches 64 --isns "1" --reps 2 --split round-robin \
  --variants "adaptive_admit2 adaptive" --probe-reps 0 --latency-reps 0 > $res/gpu64r.log 2>&1
echo "gpu batch 64, _admit2 first: exit $? ($(( $(date +%s) - t0 )) s)"; sed -n '/^variant /,/^in process/p' $res/gpu64r.log
for d in gpu64 gpu64r; do python3 launch/cluster-legs.py $res/$d/runs > $res/$d/legs.txt 2>&1; cat $res/$d/legs.txt; done
device_pack
left=$(( 570 - ($(date +%s) - t0) ))
timeout $left launch/bench-cluster-overhead.sh --out $res/b1024 --build $new --engine cpu \
  --index $res/gpu64/index --queries 240000 --batches 1024 --isns "1 4" --reps 2 --split round-robin \
  --variants "adaptive" --probe-reps 0 --latency-reps 0 > $res/b1024.log 2>&1
echo "cpu batch 1024: exit $? ($(( $(date +%s) - t0 )) s, limit $left)"; sed -n '/^variant /,/^in process/p' $res/b1024.log
python3 launch/summarize-isn-scaling.py $res/b1024/runs 2>&1 | tail -3
device_pack; ls -la "$OUT"
