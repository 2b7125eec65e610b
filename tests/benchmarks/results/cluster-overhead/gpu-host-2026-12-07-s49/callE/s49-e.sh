#!/usr/bin/env bash
# Session 49, call E (issue 16), one GPU host (16 cores), the binaries of call D (the ISN's MPI
# thread decodes waiting batches and encodes answers: --answer-thread mpi, the default; _engenc
# the ISN as before). 1M documents, and-or, k 10, round-robin shards, 2 interleaved reps.
# 1. CPU engine, batch 1,024, one ISN and four: the default, _engenc (call D: four ISNs 60,713
#    q/s against 69,939 with _engenc, 2 noisy reps), _ahead (the batch's queries admitted
#    before the answers come back: call D's idle cycle has 1.2 ms of admission after the answer)
#    and _q50_ahead (the cut aimed at the median compute as well).
# 2. GPU engine, one ISN, batch 64: the cut's aim at the 0.7 and 0.8 quantiles against the
#    default (0.95); call D: 0.5 gave 95% of in process at p50/c 1.32, 0.95 82% at 1.24.
# 3. CPU engine, batch 64, one ISN: the same aims.
# Carry: .gpuhost/s49-e.sh .gpuhost/s49a .gpuhost/rt-debs
set -u
source launch/device-env.sh .gpuhost/s49a/bin
device_results s49e
new=$(cd .gpuhost/s49a && pwd)
t0=$(date +%s)
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv > $res/nvidia-smi.txt 2>&1
nproc >> $res/nvidia-smi.txt
cat $res/nvidia-smi.txt
timeout 270 launch/bench-cluster-overhead.sh --out $res/b1024 --build $new --engine cpu \
  --docs 1000000 --queries 240000 --batches 1024 --isns "1 4" --reps 2 --split round-robin \
  --variants "adaptive adaptive_engenc adaptive_ahead adaptive_q50_ahead" --probe-reps 0 --latency-reps 0 > $res/b1024.log 2>&1
echo "cpu batch 1024: exit $? ($(( $(date +%s) - t0 )) s)"; sed -n '/^variant /,/^in process/p' $res/b1024.log
grep " rep " $res/b1024.log | tail -16
python3 launch/summarize-isn-scaling.py $res/b1024/runs 2>&1 | tail -8
device_pack
timeout 150 launch/bench-cluster-overhead.sh --out $res/gpu64 --build $new --engine gpu \
  --index $res/b1024/index --queries 240000 --batches 64 --isns "1" --reps 2 --split round-robin \
  --variants "adaptive adaptive_q70 adaptive_q80" --probe-reps 0 --latency-reps 0 > $res/gpu64.log 2>&1
echo "gpu batch 64: exit $? ($(( $(date +%s) - t0 )) s)"; sed -n '/^variant /,/^in process/p' $res/gpu64.log
grep " rep " $res/gpu64.log | tail -6
device_pack
timeout 70 launch/bench-cluster-overhead.sh --out $res/b64 --build $new --engine cpu \
  --index $res/b1024/index --queries 30000 --batches 64 --isns "1" --reps 2 --split round-robin \
  --variants "adaptive adaptive_q70 adaptive_q80" --probe-reps 0 --latency-reps 0 > $res/b64.log 2>&1
echo "cpu batch 64: exit $? ($(( $(date +%s) - t0 )) s)"; sed -n '/^variant /,/^in process/p' $res/b64.log
grep " rep " $res/b64.log | tail -6
device_pack; ls -la "$OUT"
