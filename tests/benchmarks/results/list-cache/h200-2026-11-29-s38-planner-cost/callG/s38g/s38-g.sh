#!/usr/bin/env bash
# Session 38, call G (issue 10): the online policy as the ISN now ships it (one replay thread,
# one served query in 4; the gate idle:1:0.02) and every plan (idle:0:0) against the offline
# plan at vfb 1/10, 6 rounds: the budget where calls A-F put the online arm between 0.94 and
# 1.00. gpu-host.sh's cache-drift defaults are now those of the ISN (DRIFT_SAMPLE 4,
# DRIFT_PLANNER_THREADS 1).
set -u
export NCCL_NVLS_ENABLE=0
export GPUSEARCH_DEBS=.gpuhost/rt-debs
gunzip -f .gpuhost/s38a/bin/*.gz; chmod +x .gpuhost/s38a/bin/*
export LD_LIBRARY_PATH=/opt/deps/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export GPUSEARCH_BIN=.gpuhost/s38a/bin
launch/gpu-host.sh deps > /dev/null 2>&1 || true
res=/tmp/s38g; mkdir -p $res
t0=$(date +%s)
OUT=$res/vfb1-ratio10-shipped DRIFT_POLICY=vfb:1 DRIFT_ROUNDS=6 \
  DRIFT_ONLINE="idle:1:0.02:gaps:gaps,idle:0:0:gaps:gaps" \
  CACHE_ARGS="--drift-ratio 10" timeout 330 launch/gpu-host.sh cache-drift > $res/drift.log 2>&1
echo "shipped defaults at 1/10: exit $? ($(( $(date +%s) - t0 )) s)"
grep -E '^drifting log.*(online|offline)|/ offline' $res/vfb1-ratio10-shipped/cache_drift.log | cut -c1-200
cp "$0" $res/
tar -C /tmp -czf "$OUT/s38g.tar.gz" s38g
