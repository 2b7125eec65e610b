#!/usr/bin/env bash
# Prepared in session 49 for the next device call (issue 16), one GPU host (16 cores), binaries of
# main built on the build machine and packed into .gpuhost/s50a/bin (gpusearch,
# gpusearch-aggregator, gpusearch-isn, gpu_tests; strip, xz -9e), GPU test data in .gpuhost/data.
# 1. Every GPU test (the ISN's threads changed in session 49; gpu/ did not).
# 2. CPU engine, batch 1,024, one ISN and four, 2 reps: the defaults (--answer-thread mpi, aim 0.7)
#    against _engenc (--answer-thread engine): four ISNs lost 7-13% with mpi at the 0.95 aim
#    (calls D and E, 2 reps each); and _admit4 (the admission's resolving on 4 threads: the
#    batch's 1.2 ms of admission after an early answer; session 45: +4-6% at the 0.95 aim).
# 3. Batch 64, one ISN, GPU engine (2 reps) and CPU engine (3 reps): the defaults against _ahead
#    (--admission-ahead on), whose latency cost at the 0.7 aim is unmeasured (batch 1,024: 90% ->
#    98% of in process in call F); GPU engine also _admit4 (call F's timelines: a query waits
#    about 0.05 ms from its admission to its batch's cut, the batch's other queries' resolving,
#    of p50 0.98 ms at 1.33x compute).
# Copy to .gpuhost/s50-a.sh. Carry: .gpuhost/s50-a.sh .gpuhost/s50a .gpuhost/rt-debs .gpuhost/data
# (park results/cluster-overhead/h200-2026-11-29-s4[123] outside the tree for the call).
set -u
source launch/device-env.sh .gpuhost/s50a/bin
device_results s50a
new=$(cd .gpuhost/s50a && pwd)
t0=$(date +%s)
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv > $res/nvidia-smi.txt 2>&1
nproc >> $res/nvidia-smi.txt
cat $res/nvidia-smi.txt
GPUSEARCH_SHARED_DATA=$PWD/.gpuhost/data timeout 150 $GPUSEARCH_BIN/gpu_tests > $res/gpu_tests.log 2>&1
echo "gpu_tests: exit $? ($(( $(date +%s) - t0 )) s)"; grep -E "^\[  (PASSED|FAILED|SKIPPED) " $res/gpu_tests.log | head
device_pack
timeout 190 launch/bench-cluster-overhead.sh --out $res/gpu64 --build $new --engine gpu \
  --docs 1000000 --queries 240000 --batches 64 --isns "1" --reps 2 --split round-robin \
  --variants "adaptive adaptive_ahead adaptive_admit4" --probe-reps 0 --latency-reps 0 > $res/gpu64.log 2>&1
echo "gpu batch 64: exit $? ($(( $(date +%s) - t0 )) s)"; sed -n '/^variant /,/^in process/p' $res/gpu64.log
device_pack
timeout 60 launch/bench-cluster-overhead.sh --out $res/b64 --build $new --engine cpu \
  --index $res/gpu64/index --queries 30000 --batches 64 --isns "1" --reps 3 --split round-robin \
  --variants "adaptive adaptive_ahead" --probe-reps 0 --latency-reps 0 > $res/b64.log 2>&1
echo "cpu batch 64: exit $? ($(( $(date +%s) - t0 )) s)"; sed -n '/^variant /,/^in process/p' $res/b64.log
device_pack
timeout 170 launch/bench-cluster-overhead.sh --out $res/b1024 --build $new --engine cpu \
  --index $res/gpu64/index --queries 240000 --batches 1024 --isns "1 4" --reps 2 --split round-robin \
  --variants "adaptive adaptive_engenc adaptive_admit4" --probe-reps 0 --latency-reps 0 > $res/b1024.log 2>&1
echo "cpu batch 1024: exit $? ($(( $(date +%s) - t0 )) s)"; sed -n '/^variant /,/^in process/p' $res/b1024.log
python3 launch/summarize-isn-scaling.py $res/b1024/runs 2>&1 | tail -4
device_pack; ls -la "$OUT"
