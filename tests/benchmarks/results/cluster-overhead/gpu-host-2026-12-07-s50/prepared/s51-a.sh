#!/usr/bin/env bash
# Prepared in session 50 for the next device call (issue 16), one GPU host (16 cores), about 8.5
# minutes. Binaries packed (strip, xz -9e) into .gpuhost/s51new/bin (gpusearch,
# gpusearch-aggregator, gpusearch-isn of main) and .gpuhost/s51old/bin (the same three of 34a31e2:
# main before the admission's resolving changed; `git worktree add /tmp/old 34a31e2`, build there
# with launch/build.sh).
# 1. GPU engine, batch 64, one ISN: the admission change (new) against before (`_old`), 3 reps in
#    each order (call F ran the new binaries first in both reps, and every leg was slower in their
#    runs, those the change does not touch included). Targets 1 and 4.
# 2. CPU engine, batch 1,024, one ISN and four, 2 reps: the defaults (targets 1 and 2).
# Carry: .gpuhost/s51-a.sh .gpuhost/s51new .gpuhost/s51old .gpuhost/rt-debs
# (park results/cluster-overhead/h200-2026-11-29-s4[1-6] and h200-2026-11-30-s47 outside the tree
# for the call: the 64 MiB limit).
set -u
source launch/device-env.sh .gpuhost/s51new/bin .gpuhost/s51old/bin
device_results s51a
new=$(cd .gpuhost/s51new && pwd)
old=$(cd .gpuhost/s51old && pwd)
t0=$(date +%s)
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv > $res/nvidia-smi.txt 2>&1
nproc >> $res/nvidia-smi.txt
cat $res/nvidia-smi.txt
timeout 150 launch/bench-cluster-overhead.sh --out $res/gpu64 --build $new --before $old --engine gpu \
  --docs 1000000 --queries 160000 --batches 64 --isns "1" --reps 3 --split round-robin \
  --variants "adaptive adaptive_old" --probe-reps 0 --latency-reps 0 > $res/gpu64.log 2>&1
echo "gpu batch 64, new first: exit $? ($(( $(date +%s) - t0 )) s)"; sed -n '/^variant /,/^in process/p' $res/gpu64.log
device_pack
timeout 120 launch/bench-cluster-overhead.sh --out $res/gpu64r --build $new --before $old --engine gpu \
  --index $res/gpu64/index --queries 160000 --batches 64 --isns "1" --reps 3 --split round-robin \
  --variants "adaptive_old adaptive" --probe-reps 0 --latency-reps 0 > $res/gpu64r.log 2>&1
echo "gpu batch 64, old first: exit $? ($(( $(date +%s) - t0 )) s)"; sed -n '/^variant /,/^in process/p' $res/gpu64r.log
device_pack
left=$(( 520 - ($(date +%s) - t0) ))
timeout $left launch/bench-cluster-overhead.sh --out $res/b1024 --build $new --engine cpu \
  --index $res/gpu64/index --queries 240000 --batches 1024 --isns "1 4" --reps 2 --split round-robin \
  --variants "adaptive" --probe-reps 0 --latency-reps 0 > $res/b1024.log 2>&1
echo "cpu batch 1024: exit $? ($(( $(date +%s) - t0 )) s, limit $left)"; sed -n '/^variant /,/^in process/p' $res/b1024.log
python3 launch/summarize-isn-scaling.py $res/b1024/runs 2>&1 | tail -3
device_pack; ls -la "$OUT"
