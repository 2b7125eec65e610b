#!/usr/bin/env bash
# Session 38, call H (issue 10), the session's last device time: the online policy as the ISN
# ships it (gate idle:1:0.02, one query in 4 replayed, one thread) against the offline plan at
# 1/25 and 1/50, 3 rounds each (call G: at 1/10 the gate withheld both plans it saw, 0.994).
set -u
export NCCL_NVLS_ENABLE=0
export GPUSEARCH_DEBS=.gpuhost/rt-debs
gunzip -f .gpuhost/s38a/bin/*.gz; chmod +x .gpuhost/s38a/bin/*
export LD_LIBRARY_PATH=/opt/deps/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export GPUSEARCH_BIN=.gpuhost/s38a/bin
launch/gpu-host.sh deps > /dev/null 2>&1 || true
res=/tmp/s38h; mkdir -p $res
t0=$(date +%s)
for ratio in 50 25; do
  OUT=$res/vfb1-ratio$ratio-shipped DRIFT_POLICY=vfb:1 DRIFT_ROUNDS=3 \
    DRIFT_ONLINE="idle:1:0.02:gaps:gaps" \
    CACHE_ARGS="--drift-ratio $ratio" timeout 100 launch/gpu-host.sh cache-drift > $res/drift_$ratio.log 2>&1
  echo "ratio $ratio: exit $? ($(( $(date +%s) - t0 )) s)"
  grep -E '^drifting log.*(online|offline)|/ offline' $res/vfb1-ratio$ratio-shipped/cache_drift.log | cut -c1-200
  tar -C /tmp -czf "$OUT/s38h.tar.gz" s38h
done
cp "$0" $res/
tar -C /tmp -czf "$OUT/s38h.tar.gz" s38h
