#!/usr/bin/env bash
# Session 37, call F (issue 10): call E's illegal address with table shifts; the same drift
# (vfb:1 at 1/10, 1 round) with GPUSEARCH_CHECK_CACHE_TABLES=1: every lane table checked
# against the directory before and after each change.
set -u
export NCCL_NVLS_ENABLE=0
gunzip -f .gpuhost/s37f/bin/*.gz && chmod +x .gpuhost/s37f/bin/*
export LD_LIBRARY_PATH=/opt/deps/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export GPUSEARCH_BIN=.gpuhost/s37f/bin
launch/gpu-host.sh deps > /dev/null 2>&1 || true
t0=$(date +%s)
res=/tmp/s37f; mkdir -p $res
GPUSEARCH_CHECK_CACHE_TABLES=1 OUT=$res/vfb1-ratio10 DRIFT_POLICY=vfb:1 DRIFT_ROUNDS=1 DRIFT_ONLINE="idle:0:0:gaps:gaps" \
  CACHE_ARGS="--drift-ratio 10" timeout 300 launch/gpu-host.sh cache-drift > $res/drift_vfb1_10.log 2>&1
echo "vfb:1 at 1/10 checked: exit $? ($(( $(date +%s) - t0 )) s)"
grep -E 'rounds:|swaps:|check|error|wrong' $res/drift_vfb1_10.log | head
grep -E 'check|error' $res/vfb1-ratio10/cache_drift.log | head -5
cp "$0" $res/
tar -C /tmp -czf "$OUT/s37f.tar.gz" s37f
