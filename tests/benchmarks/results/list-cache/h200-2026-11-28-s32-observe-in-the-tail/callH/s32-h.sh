#!/usr/bin/env bash
# Session 32, call H (issue 10): qtf drift, offline against every plan, at calls of 600 and of
# 2,000 queries (the default 1,000: call G), 3 rounds each.
set -u
export NCCL_NVLS_ENABLE=0 GPUSEARCH_BIN=.gpuhost/s32g/bin
for size in 600 2000; do
  DRIFT_POLICY=qtf DRIFT_ROUNDS=3 DRIFT_ONLINE="idle:0:0:gaps:gaps" CACHE_ARGS="--drift-call-size $size" \
    timeout 150 launch/gpu-host.sh cache-drift 2>&1 | grep -E 'drifting|call ms|wrong|FAILED|rror' | sed "s/^/calls of $size: /"
  echo "cache-drift $size exit $?"
  cp "$OUT/cache_drift.json" "$OUT/cache_drift_calls$size.json"; cp "$OUT/cache_drift.log" "$OUT/cache_drift_calls$size.log"
done
launch/gpu-host.sh pack > /dev/null 2>&1
ls -la "$OUT"
