#!/usr/bin/env bash
# Session 45, call D on nvidia-h200-x2 (issue 15's code, not run on a GPU before): the multi-GPU
# tests, among them MultiGpuTest.EveryGpuCountAnswersAsTheReference over both --gpu-split values;
# then one ISN over 1 and 2 GPUs, docID ranges against the query split (per-isn phase, 1M
# documents, 50,000 queries, batch 1,024, k 10; each row compared with the CPU engine's run).
# Code: da5eb2b's GPU and ISN code (unchanged since).
set -u
source launch/device-env.sh .gpuhost/s45d/bin
t0=$(date +%s)
res=/tmp/s45d; mkdir -p $res
pack() { cp "$0" $res/; (cd /tmp && find s45d -type f \( -name '*.json' -o -name '*.md' -o -name '*.log' -o -name '*.txt' -o -name '*.sh' \) \
  -size -20M -not -path '*/indexes/*' -print0 | tar --null -T - -czf "$OUT/s45d.tar.gz"); }
{ nproc; nvidia-smi -L; } > $res/machine.txt 2>&1
timeout 100 $GPUSEARCH_BIN/gpu_tests --gtest_filter='MultiGpuTest.*:NcclTopKMerge.*' > $res/multi-gpu-tests.log 2>&1
echo "multi-GPU tests: exit $? ($(( $(date +%s) - t0 )) s)"; grep -E "^\[ *(OK|FAILED|PASSED|SKIPPED) " $res/multi-gpu-tests.log
pack
timeout $(( ${LIMIT:-280} - ($(date +%s) - t0) )) launch/multi-gpu-runs.sh --out $res/mg --index-root $res/indexes --gpus "1 2" \
  --phases "per-isn" --docs 1000000 --queries 50000 --batches 1024 --ks 10 --splits "ranges queries" > $res/mg.log 2>&1
echo "multi-gpu-runs: exit $? ($(( $(date +%s) - t0 )) s)"
timeout 30 launch/multi-gpu-runs.sh --out $res/mg --gpus "1 2" --splits "ranges queries" --summarize-only > $res/mg-summary.log 2>&1; tail -20 $res/mg-summary.log
pack; ls -la "$OUT"
