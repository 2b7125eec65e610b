#!/usr/bin/env bash
# Session 37, call D (issue 10): where a swap's time goes (the device cache's apply_seconds:
# directory, relocate, copy, table), vfb:1 at 1/10, 3 rounds, same code as call C plus timers.
set -u
export NCCL_NVLS_ENABLE=0
gunzip -f .gpuhost/s37d/bin/*.gz && chmod +x .gpuhost/s37d/bin/*
export LD_LIBRARY_PATH=/opt/deps/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export GPUSEARCH_BIN=.gpuhost/s37d/bin
launch/gpu-host.sh deps > /dev/null 2>&1 || true
t0=$(date +%s)
res=/tmp/s37d; mkdir -p $res
OUT=$res/vfb1-ratio10 DRIFT_POLICY=vfb:1 DRIFT_ROUNDS=3 DRIFT_ONLINE="idle:0:0:gaps:gaps" \
  CACHE_ARGS="--drift-ratio 10" timeout 200 launch/gpu-host.sh cache-drift > $res/drift_vfb1_10.log 2>&1
echo "vfb:1 at 1/10: exit $? ($(( $(date +%s) - t0 )) s)"
grep -E 'rounds:|swaps:' $res/drift_vfb1_10.log
python3 - <<'PY'
import json
d = json.load(open('/tmp/s37d/vfb1-ratio10/cache_drift.json'))['online']['online']['list_cache']
print('device', json.dumps(d['device']))
print('swaps', json.dumps(d['online_swaps']))
PY
cp "$0" $res/
tar -C /tmp -czf "$OUT/s37d.tar.gz" s37d
