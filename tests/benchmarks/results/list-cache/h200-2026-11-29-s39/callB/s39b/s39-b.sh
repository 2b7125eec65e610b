#!/usr/bin/env bash
# Session 39, call B (issue 10). Call A: at the ISN's cadence (a plan every 2,000 served queries,
# one in 4 replayed, one thread) the ISN's gate went in once at 1/10 and twice at 1/50 with
# back-off 8 or 1 alike (0.998 / 1.051 of offline; every plan 1.016 / 1.058). Here: 1/10 with
# 8 rounds (the tie needs a tighter median), 1/25, and the unchanged mix at 1/10 (does the gate
# hold, and what does taking every plan cost there). Binaries: .gpuhost/s39a/bin (36632a4).
set -u
export NCCL_NVLS_ENABLE=0
export GPUSEARCH_DEBS=.gpuhost/rt-debs
export LD_LIBRARY_PATH=/opt/deps/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export GPUSEARCH_BIN=.gpuhost/s39a/bin
launch/gpu-host.sh deps > /dev/null 2>&1 || true
res=/tmp/s39b; mkdir -p $res
t0=$(date +%s)
arms="idle:1:0.02:gaps:gaps:8:4,idle:0:0:gaps:gaps:1:4"
step() {  # name rounds timeout drift-log cache-args
  OUT=$res/$1 DRIFT_POLICY=vfb:1 DRIFT_ROUNDS=$2 DRIFT_REPLAN=2000 DRIFT_ONLINE="$arms" \
    DRIFT_LOG="$4" CACHE_ARGS="$5" timeout $3 launch/gpu-host.sh cache-drift > $res/$1.log 2>&1
  echo "$1: exit $? ($(( $(date +%s) - t0 )) s)"
  grep -E '/ offline|online policy:' $res/$1/cache_drift.log | cut -c1-200
  grep -E 'PASSED|FAILED' $res/$1/cache_drift_tests.log | head -3
  tar -C /tmp -czf "$OUT/s39b.tar.gz" s39b
}
step drift-ratio10-8rounds 8 270 "drift_ramp=0.5,drift_topics=8" "--drift-ratio 10"
step unchanged-ratio10 4 130 "drift_ramp=0.5,drift_topics=8,query_drift=0.000001" "--drift-ratio 10"
step drift-ratio25 4 130 "drift_ramp=0.5,drift_topics=8" "--drift-ratio 25"
cp "$0" $res/
tar -C /tmp -czf "$OUT/s39b.tar.gz" s39b
