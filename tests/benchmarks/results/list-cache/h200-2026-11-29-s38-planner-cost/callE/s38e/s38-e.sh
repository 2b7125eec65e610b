#!/usr/bin/env bash
# Session 38, call E (issue 10). Calls C and D: the online arm's shortfall at vfb 1/10 is the
# planner's presence (an arm whose gate withholds every plan falls as far: 0.942 with 4 replay
# threads, 0.972 with 1, 0.915 with 2). The replay re-runs every served query on the CPU. Does
# replaying one query in 4 (--cache-sample 4) cut the cost and keep the hit rate? 1 replay
# thread (the ISN's default), 5 rounds. Bins: .gpuhost/s38a/bin.
set -u
export NCCL_NVLS_ENABLE=0
export GPUSEARCH_DEBS=.gpuhost/rt-debs
gunzip -f .gpuhost/s38a/bin/*.gz; chmod +x .gpuhost/s38a/bin/*
export LD_LIBRARY_PATH=/opt/deps/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export GPUSEARCH_BIN=.gpuhost/s38a/bin
launch/gpu-host.sh deps > /dev/null 2>&1 || true
res=/tmp/s38e; mkdir -p $res
t0=$(date +%s)
OUT=$res/vfb1-ratio10-sample DRIFT_POLICY=vfb:1 DRIFT_ROUNDS=5 DRIFT_PLANNER_THREADS=1 \
  DRIFT_ONLINE="idle:0:0:gaps:gaps:8:1,idle:0:0:gaps:gaps:8:4,idle:1e12:0:gaps:gaps:8:4" \
  CACHE_ARGS="--drift-ratio 10" timeout 400 launch/gpu-host.sh cache-drift > $res/drift.log 2>&1
echo "sampled replay: exit $? ($(( $(date +%s) - t0 )) s)"
grep -E '^drifting log.*(online|offline)|/ offline|online policy:' $res/vfb1-ratio10-sample/cache_drift.log | cut -c1-200
cp "$0" $res/
tar -C /tmp -czf "$OUT/s38e.tar.gz" s38e
