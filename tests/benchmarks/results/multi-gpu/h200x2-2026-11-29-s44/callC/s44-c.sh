#!/usr/bin/env bash
# Session 44, call C (issue 15) on nvidia-h200-x2: the NCCL merge kernel with a thread per hit
# (placed by merged rank) and NCCL's connections made at start; the multi-GPU tests; then
# launch/multi-gpu-runs.sh with longer runs: k = 10 on 100,000 queries (per ISN, per node closed
# and at 100,000 q/s, weak scaling), then k = 1000 on 20,000 (per ISN), each row's differences
# kept in runs/NAME.compare.txt.
set -u
source launch/device-env.sh .gpuhost/s44c/bin
t0=$(date +%s)
res=/tmp/s44c; mkdir -p $res
pack() { cp "$0" $res/; (cd /tmp && find s44c -type f \( -name '*.json' -o -name '*.md' -o -name '*.log' -o -name '*.txt' -o -name '*.sh' \) \
  -size -20M -not -path '*/indexes/*' -print0 | tar --null -T - -czf "$OUT/s44c.tar.gz"); }
{ nproc; nvidia-smi -L; } > $res/machine.txt 2>&1
timeout 90 $GPUSEARCH_BIN/gpu_tests --gtest_filter='MultiGpuTest.*:NcclTopKMerge.*' > $res/multi-gpu-tests.log 2>&1
echo "multi-GPU tests: exit $? ($(( $(date +%s) - t0 )) s)"; grep -E "^\[ *(OK|FAILED|PASSED|SKIPPED) " $res/multi-gpu-tests.log
pack
timeout $(( 370 - ($(date +%s) - t0) )) launch/multi-gpu-runs.sh --out $res/mg-k10 --index-root $res/indexes --gpus "1 2" \
  --phases "per-isn per-node weak" --docs 2500000 --queries 100000 --ks 10 --rates "0 100000" > $res/mg-k10.log 2>&1
echo "multi-gpu-runs k 10: exit $? ($(( $(date +%s) - t0 )) s)"
timeout 30 launch/multi-gpu-runs.sh --out $res/mg-k10 --gpus "1 2" --summarize-only > $res/mg-k10-summary.log 2>&1; tail -24 $res/mg-k10-summary.log
pack
timeout $(( 545 - ($(date +%s) - t0) )) launch/multi-gpu-runs.sh --out $res/mg-k1000 --index-root $res/indexes --gpus "1 2" \
  --phases "per-isn" --docs 2500000 --queries 20000 --ks 1000 > $res/mg-k1000.log 2>&1
echo "multi-gpu-runs k 1000: exit $? ($(( $(date +%s) - t0 )) s)"
timeout 30 launch/multi-gpu-runs.sh --out $res/mg-k1000 --gpus "1 2" --summarize-only > $res/mg-k1000-summary.log 2>&1; tail -12 $res/mg-k1000-summary.log
for f in $res/mg-k1000/runs/*.compare.txt; do echo "== $f"; head -5 $f; done 2>/dev/null | cut -c1-300
pack; ls -la "$OUT"
