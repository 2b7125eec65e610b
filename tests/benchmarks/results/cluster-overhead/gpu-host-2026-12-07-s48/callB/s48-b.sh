#!/usr/bin/env bash
# Session 48, call B (issue 16), one GPU host (16 cores), the final code (5e79b94 on):
# 1. CPU engine, batch 1,024 (1M documents, 240,000 queries, and-or, round-robin shards): one ISN
#    and four, 4 interleaved reps, just in time (the default), against the in-process search,
#    which now merges and writes a batch's answers while the engines search the next.
# 2. CPU engine, batch 64 (30,000 queries of the same index, 4 reps): targets 1, 3 and 4 against
#    the new in-process baseline.
# 3. GPU engine, one ISN, batch 64 (240,000 queries, 3 reps): call A found it at 85% of in process
#    (the ISN idles ~0.13 ms of a 0.83 ms cycle: the next batch is cut after the answers). The
#    admission's knobs side by side: the default, --admission-quantile 0.5, --admission-ahead on,
#    window admission.
# Carry: .gpuhost/s48-b.sh .gpuhost/s48a .gpuhost/rt-debs
set -u
source launch/device-env.sh .gpuhost/s48a/bin
device_results s48b
new=$(cd .gpuhost/s48a && pwd)
t0=$(date +%s)
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv > $res/nvidia-smi.txt 2>&1
nproc >> $res/nvidia-smi.txt
timeout 220 launch/bench-cluster-overhead.sh --out $res/b1024 --build $new --engine cpu \
  --docs 1000000 --queries 240000 --batches 1024 --isns "1 4" --reps 4 --split round-robin \
  --variants "adaptive" --probe-reps 0 --latency-reps 0 > $res/b1024.log 2>&1
echo "batch 1024: exit $? ($(( $(date +%s) - t0 )) s)"; sed -n '/^variant /,/^in process/p' $res/b1024.log
python3 launch/summarize-isn-scaling.py $res/b1024/runs | tee $res/scaling.txt
python3 launch/summarize-cycle.py $res/b1024/runs > $res/cycle.txt 2>&1; cut -c1-100 $res/cycle.txt
device_pack
timeout 100 launch/bench-cluster-overhead.sh --out $res/b64 --build $new --engine cpu \
  --index $res/b1024/index --queries 30000 --batches 64 --isns "1 4" --reps 4 --split round-robin \
  --variants "adaptive" --probe-reps 0 --latency-reps 0 > $res/b64.log 2>&1
echo "cpu batch 64: exit $? ($(( $(date +%s) - t0 )) s)"; sed -n '/^variant /,/^in process/p' $res/b64.log
device_pack
timeout 150 launch/bench-cluster-overhead.sh --out $res/gpu64 --build $new --engine gpu \
  --index $res/b1024/index --queries 240000 --batches 64 --isns "1" --reps 3 --split round-robin \
  --variants "adaptive adaptive_q50 adaptive_ahead adaptive_window" --probe-reps 0 --latency-reps 0 > $res/gpu64.log 2>&1
echo "gpu batch 64: exit $? ($(( $(date +%s) - t0 )) s)"; sed -n '/^variant /,/^in process/p' $res/gpu64.log
device_pack; ls -la "$OUT"
