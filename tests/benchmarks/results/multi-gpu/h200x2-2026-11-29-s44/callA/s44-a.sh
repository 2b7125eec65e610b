#!/usr/bin/env bash
# Session 44, call A (issue 15) on nvidia-h200-x2: the multi-GPU tests on two GPUs, then
# launch/multi-gpu-runs.sh (per ISN with 1 and 2 GPUs on the 2.5M synthetic index, batches 1,024
# and 4,096, k 10 and 1000; then per node and weak scaling) until the call's time runs short.
set -u
source launch/device-env.sh .gpuhost/s44a/bin
t0=$(date +%s)
res=/tmp/s44a; mkdir -p $res
pack() { cp "$0" $res/; (cd /tmp && find s44a -type f \( -name '*.json' -o -name '*.md' -o -name '*.log' -o -name '*.txt' -o -name '*.sh' \) \
  -size -20M -not -path '*/indexes/*' -print0 | tar --null -T - -czf "$OUT/s44a.tar.gz"); }
{ nproc; nvidia-smi; nvidia-smi topo -m; } > $res/machine.txt 2>&1; head -20 $res/machine.txt
NCCL_DEBUG=INFO timeout 150 $GPUSEARCH_BIN/gpu_tests --gtest_filter='MultiGpuTest.*:NcclTopKMerge.*' > $res/gpu_tests.log 2>&1
echo "gpu_tests: exit $? ($(( $(date +%s) - t0 )) s)"; grep -E "^\[ *(OK|FAILED|PASSED|SKIPPED) |NCCL version" $res/gpu_tests.log | head -20
pack
timeout $(( 540 - ($(date +%s) - t0) )) launch/multi-gpu-runs.sh --out $res/mg --gpus "1 2" --phases "per-isn per-node weak" \
  --docs 2500000 > $res/mg.log 2>&1
echo "multi-gpu-runs: exit $? ($(( $(date +%s) - t0 )) s)"; tail -40 $res/mg.log
timeout 30 launch/multi-gpu-runs.sh --out $res/mg --gpus "1 2" --summarize-only > $res/mg-summary.log 2>&1; tail -30 $res/mg-summary.log
pack; ls -la "$OUT"
