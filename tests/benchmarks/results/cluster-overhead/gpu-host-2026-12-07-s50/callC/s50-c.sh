#!/usr/bin/env bash
# Session 50, call C (issue 16): the ISN's answer ids from a copy of the shard's id table in huge
# pages (--id-table huge-pages, the new default) against the mapped files (_idmapped, before),
# one GPU host (16 cores), binaries of this tree packed into .gpuhost/s50c/bin (gpusearch,
# gpusearch-aggregator, gpusearch-isn; strip, xz -9e).
# 1. GPU engine, batch 64, one ISN, 3 reps: the defaults and _idmapped (targets 1 and 4).
# 2. CPU engine, batch 64, one ISN, 3 reps: the same.
# 3. CPU engine, batch 1,024, one ISN and four, 2 reps: the same.
# Carry: .gpuhost/s50-c.sh .gpuhost/s50c .gpuhost/rt-debs
set -u
source launch/device-env.sh .gpuhost/s50c/bin
device_results s50c
new=$(cd .gpuhost/s50c && pwd)
t0=$(date +%s)
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv > $res/nvidia-smi.txt 2>&1
nproc >> $res/nvidia-smi.txt
cat $res/nvidia-smi.txt
timeout 200 launch/bench-cluster-overhead.sh --out $res/gpu64 --build $new --engine gpu \
  --docs 1000000 --queries 240000 --batches 64 --isns "1" --reps 3 --split round-robin \
  --variants "adaptive adaptive_idmapped" --probe-reps 0 --latency-reps 0 > $res/gpu64.log 2>&1
echo "gpu batch 64: exit $? ($(( $(date +%s) - t0 )) s)"; sed -n '/^variant /,/^in process/p' $res/gpu64.log
device_pack
timeout 70 launch/bench-cluster-overhead.sh --out $res/b64 --build $new --engine cpu \
  --index $res/gpu64/index --queries 30000 --batches 64 --isns "1" --reps 3 --split round-robin \
  --variants "adaptive adaptive_idmapped" --probe-reps 0 --latency-reps 0 > $res/b64.log 2>&1
echo "cpu batch 64: exit $? ($(( $(date +%s) - t0 )) s)"; sed -n '/^variant /,/^in process/p' $res/b64.log
device_pack
left=$(( 545 - ($(date +%s) - t0) ))
timeout $left launch/bench-cluster-overhead.sh --out $res/b1024 --build $new --engine cpu \
  --index $res/gpu64/index --queries 240000 --batches 1024 --isns "1 4" --reps 2 --split round-robin \
  --variants "adaptive adaptive_idmapped" --probe-reps 0 --latency-reps 0 > $res/b1024.log 2>&1
echo "cpu batch 1024: exit $? ($(( $(date +%s) - t0 )) s, limit $left)"; sed -n '/^variant /,/^in process/p' $res/b1024.log
python3 launch/summarize-isn-scaling.py $res/b1024/runs 2>&1 | tail -5
device_pack; ls -la "$OUT"
