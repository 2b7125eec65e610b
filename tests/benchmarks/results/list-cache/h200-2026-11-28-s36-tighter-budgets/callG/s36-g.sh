#!/usr/bin/env bash
# Session 36, call G (issue 10): the final list cache: lazy eviction, the first copy of a change whatever its size, best fit, rebuild at 1/8.
# The list cache GPU tests, then the online policy against the offline plan on the drifting log, qtf, at
# 1/10, 1/25 and 1/50 of the postings, 3 rounds each, calls of 1,000 queries (call C: before).
set -u
export NCCL_NVLS_ENABLE=0
gunzip -f .gpuhost/s36g/bin/*.gz && chmod +x .gpuhost/s36g/bin/*
export LD_LIBRARY_PATH=/opt/deps/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export GPUSEARCH_BIN=.gpuhost/s36g/bin
launch/gpu-host.sh deps > /dev/null 2>&1 || true
t0=$(date +%s)
res=/tmp/s36g; mkdir -p $res
GTEST_FILTER='GpuListCache*' timeout 100 .gpuhost/s36g/bin/gpu_tests > $res/gpu_tests.log 2>&1
echo "gpu tests: exit $? ($(( $(date +%s) - t0 )) s)"
grep -E "^\[  (PASSED|FAILED|SKIPPED) " $res/gpu_tests.log | head -12
for ratio in 25 50; do
  OUT=$res/ratio$ratio DRIFT_POLICY=qtf DRIFT_ROUNDS=3 DRIFT_ONLINE="idle:0:0:gaps:gaps" \
    CACHE_ARGS="--drift-ratio $ratio" timeout 130 launch/gpu-host.sh cache-drift > $res/drift_$ratio.log 2>&1
  echo "ratio $ratio: exit $? ($(( $(date +%s) - t0 )) s)"
  grep -E 'FAILED|drifting log at .* 3 rounds|wrong|rror' $res/drift_$ratio.log | head -6
  grep -E 'hit 0' $res/drift_$ratio.log | head -2
done
cp "$0" $res/
(cd /tmp && find s36g -type f \( -name '*.json' -o -name '*.log' -o -name '*.xml' -o -name '*.sh' \) \
  -size -20M -print0 | tar --null -T - -czf "$OUT/s36g.tar.gz")
ls -la "$OUT"
