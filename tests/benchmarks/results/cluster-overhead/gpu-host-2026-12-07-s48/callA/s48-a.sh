#!/usr/bin/env bash
# Session 48, call A (issue 16), on one H200:
# 1. Every GPU test on the current code (5e79b94 on: gpusearch search merges and writes a batch's
#    answers while the engines search the next; the GPU engine is one of its callers).
# 2. The GPU engine in process and through one ISN, 1M documents, 240,000 queries, batch 1,024 and
#    64, 3 reps: what the overlapped writing gives `gpusearch search --engine gpu` (session 47:
#    88,239 q/s at 1,024 with 2.1 of 2.9 s outside the engine), and one ISN's share of it now.
# Carry: .gpuhost/s48-a.sh .gpuhost/s48a .gpuhost/rt-debs .gpuhost/data
set -u
source launch/device-env.sh .gpuhost/s48a/bin
device_results s48a
new=$(cd .gpuhost/s48a && pwd)
t0=$(date +%s)
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export GPUSEARCH_SHARED_DATA=$PWD/.gpuhost/data
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv > $res/nvidia-smi.txt 2>&1
nproc >> $res/nvidia-smi.txt
timeout 200 $GPUSEARCH_BIN/gpu_tests --gtest_output=xml:$res/gpu_tests.xml > $res/gpu_tests.log 2>&1
echo "gpu_tests: exit $? ($(( $(date +%s) - t0 )) s)"
grep -E "^\[  (FAILED|PASSED|SKIPPED) |Failure" $res/gpu_tests.log | head -30
grep -E "tests ran" $res/gpu_tests.log
device_pack
timeout 300 launch/bench-cluster-overhead.sh --out $res/gpu --build $new --engine gpu \
  --docs 1000000 --queries 240000 --batches "1024 64" --isns "1" --reps 3 --split round-robin \
  --variants "adaptive" --probe-reps 0 --latency-reps 0 > $res/gpu.log 2>&1
echo "gpu engine: exit $? ($(( $(date +%s) - t0 )) s)"; sed -n '/^variant /,$p' $res/gpu.log | head -20
python3 - $res/gpu/runs <<'PY'
import glob, json, os, sys
for f in sorted(glob.glob(os.path.join(sys.argv[1], "inprocess-*.json"))):
    m = json.load(open(f))
    keys = {k: m.get(k) for k in ("queries_per_second", "search_seconds", "engine_seconds", "engine_queries_per_second") if k in m}
    print(os.path.basename(f), keys)
PY
device_pack; ls -la "$OUT"
