#!/usr/bin/env bash
# Session 39, call F (issue 10), main b605987 (binaries of call E): the ISN's online defaults
# (gate 1:0.02, back-off 8, one query in 4 replayed on one thread, a plan every 2,000 served)
# against the offline plan on the drifting log, 1/10 with 8 rounds (call E: 0.990 over 4;
# calls A-B at 36632a4: 0.998 over 4, 1.028 over 8) and 1/50 with 4.
set -u
export NCCL_NVLS_ENABLE=0
export GPUSEARCH_DEBS=.gpuhost/rt-debs
export LD_LIBRARY_PATH=/opt/deps/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export GPUSEARCH_BIN=.gpuhost/s39e/bin
launch/gpu-host.sh deps > /dev/null 2>&1 || true
res=/tmp/s39f; mkdir -p $res
t0=$(date +%s)
step() {  # name rounds timeout ratio
  OUT=$res/$1 DRIFT_POLICY=vfb:1 DRIFT_ROUNDS=$2 DRIFT_REPLAN=2000 DRIFT_ONLINE="idle:1:0.02:gaps:gaps:8:4" \
    CACHE_ARGS="--drift-ratio $4" timeout $3 launch/gpu-host.sh cache-drift > $res/$1.log 2>&1
  echo "$1: exit $? ($(( $(date +%s) - t0 )) s)"
  grep -E '/ offline' $res/$1/cache_drift.log
  tar -C /tmp -czf "$OUT/s39f.tar.gz" s39f
}
step drift-ratio10-8rounds 8 200 10
step drift-ratio50 4 $(( 300 - ($(date +%s) - t0) )) 50
cp "$0" $res/
tar -C /tmp -czf "$OUT/s39f.tar.gz" s39f
