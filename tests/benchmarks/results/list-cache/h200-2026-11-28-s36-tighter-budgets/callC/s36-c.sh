#!/usr/bin/env bash
# Session 36, call C (issue 10): the online policy against the offline plan on the drifting log
# where shipping weighs more: qtf, cache budgets of 1/25 and 1/50 of the postings (10x: sessions
# 31-32, parity), 3 rounds each, calls of 1,000 queries.
set -u
export NCCL_NVLS_ENABLE=0
gunzip -f .gpuhost/s36c/bin/*.gz && chmod +x .gpuhost/s36c/bin/*
export LD_LIBRARY_PATH=/opt/deps/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export GPUSEARCH_BIN=.gpuhost/s36c/bin
launch/gpu-host.sh deps > /dev/null 2>&1 || true
t0=$(date +%s)
res=/tmp/s36c; mkdir -p $res
for ratio in 25 50; do
  OUT=$res/ratio$ratio DRIFT_POLICY=qtf DRIFT_ROUNDS=3 DRIFT_ONLINE="idle:0:0:gaps:gaps" \
    CACHE_ARGS="--drift-ratio $ratio" timeout 200 launch/gpu-host.sh cache-drift > $res/drift_$ratio.log 2>&1
  echo "ratio $ratio: exit $? ($(( $(date +%s) - t0 )) s)"
  grep -E 'PASSED|FAILED|drifting|call ms|wrong|rror' $res/drift_$ratio.log | head -20
done
cp "$0" $res/
(cd /tmp && find s36c -type f \( -name '*.json' -o -name '*.log' -o -name '*.xml' -o -name '*.sh' \) \
  -size -20M -print0 | tar --null -T - -czf "$OUT/s36c.tar.gz")
ls -la "$OUT"
