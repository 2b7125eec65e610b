#!/usr/bin/env bash
# Prepared in session 38 for the next device call (issue 10). Calls G and H: with one served
# query in 4 replayed and a re-plan every 1,000 replayed, the ISN's gate (idle:1:0.02) looked
# twice in the 24,000-query drifting log (the back-off doubles the interval after each withheld
# plan) and withheld both at 1/10, 1/25 and 1/50; the arm applying every plan won at all three
# (1.045, 1.079, 1.054). Here: the gate with a plan every 1,000 served queries (250 replayed;
# `--cache-replan` counts served queries since the end of session 38), the cadence of sessions
# up to 37, and every plan at that cadence, at 1/10 and 1/50, 4 rounds.
# Before it: build, strip and gzip gpusearch, gpu_tests and bench_list_cache into
# .gpuhost/s39a/bin; `launch/gpu-host.sh runtime-debs`; copy this script to .gpuhost/s39-a.sh;
# carry .gpuhost/rt-debs, .gpuhost/s39a and it. About 5 minutes on the H200.
set -u
export NCCL_NVLS_ENABLE=0
export GPUSEARCH_DEBS=.gpuhost/rt-debs
gunzip -f .gpuhost/s39a/bin/*.gz; chmod +x .gpuhost/s39a/bin/*
export LD_LIBRARY_PATH=/opt/deps/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export GPUSEARCH_BIN=.gpuhost/s39a/bin
launch/gpu-host.sh deps > /dev/null 2>&1 || true
res=/tmp/s39a; mkdir -p $res
t0=$(date +%s)
for ratio in 10 50; do
  OUT=$res/vfb1-ratio$ratio-replan1000 DRIFT_POLICY=vfb:1 DRIFT_ROUNDS=4 DRIFT_REPLAN=1000 \
    DRIFT_ONLINE="idle:1:0.02:gaps:gaps,idle:0:0:gaps:gaps" \
    CACHE_ARGS="--drift-ratio $ratio" timeout 250 launch/gpu-host.sh cache-drift > $res/drift_$ratio.log 2>&1
  echo "ratio $ratio: exit $? ($(( $(date +%s) - t0 )) s)"
  grep -E '^drifting log.*(online|offline)|/ offline|online policy:' $res/vfb1-ratio$ratio-replan1000/cache_drift.log | cut -c1-220
  tar -C /tmp -czf "$OUT/s39a.tar.gz" s39a
done
cp "$0" $res/
tar -C /tmp -czf "$OUT/s39a.tar.gz" s39a
