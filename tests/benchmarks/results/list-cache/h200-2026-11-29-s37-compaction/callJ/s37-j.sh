#!/usr/bin/env bash
# Session 37, call J (issue 10): vfb:1 at 1/10 on the final code, the online policy replaying
# every served query against one in four (the planner's CPU: 9.5 s of process CPU against 0.65
# for the offline arm in call A), same run, 3 rounds.
set -u
export NCCL_NVLS_ENABLE=0
gunzip -f .gpuhost/s37j/bin/*.gz && chmod +x .gpuhost/s37j/bin/*
export LD_LIBRARY_PATH=/opt/deps/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export GPUSEARCH_BIN=.gpuhost/s37j/bin
launch/gpu-host.sh deps > /dev/null 2>&1 || true
t0=$(date +%s)
res=/tmp/s37j; mkdir -p $res
OUT=$res/vfb1-ratio10 DRIFT_POLICY=vfb:1 DRIFT_ROUNDS=3 DRIFT_ONLINE="idle:0:0:gaps:gaps,idle:0:0:gaps:gaps:8:4" \
  CACHE_ARGS="--drift-ratio 10" timeout 280 launch/gpu-host.sh cache-drift > $res/drift_vfb1_10.log 2>&1
echo "vfb:1 at 1/10: exit $? ($(( $(date +%s) - t0 )) s)"
grep -E '^drifting|rounds:|online policy' $res/vfb1-ratio10/cache_drift.log | cut -c1-220
cp "$0" $res/
tar -C /tmp -czf "$OUT/s37j.tar.gz" s37j
