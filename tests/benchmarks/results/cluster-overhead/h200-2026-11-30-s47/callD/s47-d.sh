#!/usr/bin/env bash
# Session 47, call D (issue 16), two parts in one loan:
# 1. The GPU engine through the cluster with this session's defaults (the 1 MiB shared-memory
#    eager limit set before MPI_Init, new since the GPU engine's last cluster run): one ISN and
#    four ISNs sharing the one H200, against the GPU engine in process, at batch 1,024 and 64 (1M
#    documents, 240,000 queries, and-or, round-robin shards, 3 interleaved reps).
# 2. Batch 64 with the CPU engine and the final defaults, one ISN and four (30,000 queries of the
#    same index, 4 interleaved reps): targets 1-3 at batch 64 (one ISN >= 90% of in process,
#    aggregator overhead <= 0.5 ms, p50 over compute <= 1.3). Session 46 had 2 reps each in calls
#    B and C, one of C's disturbed.
# Every run's answers are compared with the in-process run. Carry: .gpuhost/s47-d.sh
# .gpuhost/s47b .gpuhost/rt-debs (the binaries of call C); move
# tests/benchmarks/results/cluster-overhead/h200-2026-11-29-s4[56] out of the tree for the call.
set -u
source launch/device-env.sh .gpuhost/s47b/bin
t0=$(date +%s)
res=/tmp/s47d; mkdir -p $res
new=$(cd .gpuhost/s47b && pwd)
pack() { cp "$0" $res/; (cd /tmp && find s47d -type f \( -name '*.json' -o -name '*.json.gz' -o -name '*.log' -o -name '*.txt' -o -name '*.sh' \) \
  -size -20M -not -path '*/index*' -print0 | tar --null -T - -czf "$OUT/s47d.tar.gz"); }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv > $res/gpu.txt 2>&1
timeout 270 launch/bench-cluster-overhead.sh --out $res/gpu --build $new --engine gpu \
  --docs 1000000 --queries 240000 --batches "1024 64" --isns "1 4" --reps 3 --split round-robin \
  --variants "adaptive" --probe-reps 0 --latency-reps 0 > $res/gpu.log 2>&1
echo "gpu engine: exit $? ($(( $(date +%s) - t0 )) s)"; sed -n '/^variant /,$p' $res/gpu.log | head -30
python3 launch/summarize-isn-scaling.py $res/gpu/runs | tee $res/scaling-gpu.txt
python3 launch/summarize-cycle.py $res/gpu/runs > $res/cycle-gpu.txt 2>&1; cat $res/cycle-gpu.txt
pack
timeout 220 launch/bench-cluster-overhead.sh --out $res/b64 --build $new --engine cpu \
  --index $res/gpu/index --queries 30000 --batches 64 --isns "1 4" --reps 4 --split round-robin \
  --variants "adaptive" --probe-reps 0 --latency-reps 0 > $res/b64.log 2>&1
echo "cpu batch 64: exit $? ($(( $(date +%s) - t0 )) s)"; sed -n '/^variant /,$p' $res/b64.log | head -30
python3 launch/summarize-cycle.py $res/b64/runs > $res/cycle64.txt 2>&1; cat $res/cycle64.txt
pack; ls -la "$OUT"
