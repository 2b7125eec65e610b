#!/usr/bin/env bash
# Session 44, call B (issue 15) on nvidia-h200-x2, after the fix of call A's failure (a GpuEngine
# on GPU 1 built while GPU 0 was current: its lanes' streams on GPU 0, cudaErrorInvalidValue at
# the first launch, every batch then on the CPU). The new test on the code before the fix (it
# must fail) and after; the multi-GPU tests; launch/multi-gpu-runs.sh again (20,000 queries, per
# node also at 50,000 q/s); then the whole GPU suite in the time left.
set -u
source launch/device-env.sh .gpuhost/s44b/bin
t0=$(date +%s)
res=/tmp/s44b; mkdir -p $res
pack() { cp "$0" $res/; (cd /tmp && find s44b -type f \( -name '*.json' -o -name '*.md' -o -name '*.log' -o -name '*.txt' -o -name '*.sh' \) \
  -size -20M -not -path '*/indexes/*' -print0 | tar --null -T - -czf "$OUT/s44b.tar.gz"); }
{ nproc; nvidia-smi -L; } > $res/machine.txt 2>&1
f='MultiGpuTest.EngineOnAnotherGpuThanTheCurrentOneAnswersAsTheReference'
timeout 60 $GPUSEARCH_BIN/gpu_tests_unfixed --gtest_filter="$f" > $res/new-test-before-fix.log 2>&1
echo "new test, code before the fix: exit $?"; grep -E "Failure|error|^\[ *(OK|FAILED|PASSED|SKIPPED) " $res/new-test-before-fix.log | head -8
timeout 60 $GPUSEARCH_BIN/gpu_tests --gtest_filter="$f" > $res/new-test.log 2>&1
echo "new test, fixed: exit $?"; grep -E "^\[ *(OK|FAILED|PASSED|SKIPPED) " $res/new-test.log | head -5
timeout 90 $GPUSEARCH_BIN/gpu_tests --gtest_filter='MultiGpuTest.*:NcclTopKMerge.*' > $res/multi-gpu-tests.log 2>&1
echo "multi-GPU tests: exit $? ($(( $(date +%s) - t0 )) s)"; grep -E "^\[ *(OK|FAILED|PASSED|SKIPPED) " $res/multi-gpu-tests.log
pack
timeout $(( 420 - ($(date +%s) - t0) )) launch/multi-gpu-runs.sh --out $res/mg --gpus "1 2" --phases "per-isn per-node weak" \
  --docs 2500000 --queries 20000 --rates "0 50000" > $res/mg.log 2>&1
echo "multi-gpu-runs: exit $? ($(( $(date +%s) - t0 )) s)"
timeout 30 launch/multi-gpu-runs.sh --out $res/mg --gpus "1 2" --summarize-only > $res/mg-summary.log 2>&1; tail -32 $res/mg-summary.log
pack
left=$(( 560 - ($(date +%s) - t0) ))
if [ $left -gt 60 ]; then
  timeout $left $GPUSEARCH_BIN/gpu_tests > $res/gpu-tests-all.log 2>&1
  echo "all GPU tests: exit $? ($(( $(date +%s) - t0 )) s)"; grep -E "^\[ *(FAILED|PASSED|SKIPPED) |tests ran" $res/gpu-tests-all.log | head
fi
pack; ls -la "$OUT"
