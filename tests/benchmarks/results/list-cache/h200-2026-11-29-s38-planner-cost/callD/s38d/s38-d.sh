#!/usr/bin/env bash
# Session 38, call D (issue 10). Call C: the online arm's shortfall at vfb 1/10 (0.941) is the
# planner's presence, not its swaps (an arm whose gate withholds every plan: 0.942). Does it
# scale with the planner's threads? The bench's default is 4 replay threads; the ISN's is 1.
# Same arms, planner threads 1 then 2. Bins: .gpuhost/s38a/bin.
set -u
export NCCL_NVLS_ENABLE=0
export GPUSEARCH_DEBS=.gpuhost/rt-debs
gunzip -f .gpuhost/s38a/bin/*.gz; chmod +x .gpuhost/s38a/bin/*
export LD_LIBRARY_PATH=/opt/deps/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export GPUSEARCH_BIN=.gpuhost/s38a/bin
launch/gpu-host.sh deps > /dev/null 2>&1 || true
res=/tmp/s38d; mkdir -p $res
t0=$(date +%s)
for threads in 1 2; do
  OUT=$res/vfb1-ratio10-threads$threads DRIFT_POLICY=vfb:1 DRIFT_ROUNDS=4 \
    DRIFT_ONLINE="idle:0:0:gaps:gaps,idle:1e12:0:gaps:gaps" \
    DRIFT_PLANNER_THREADS=$threads CACHE_ARGS="--drift-ratio 10" timeout 260 \
    launch/gpu-host.sh cache-drift > $res/drift_threads$threads.log 2>&1
  echo "planner threads $threads: exit $? ($(( $(date +%s) - t0 )) s)"
  grep -E '^drifting log.*(online|offline)|/ offline|online policy:' $res/vfb1-ratio10-threads$threads/cache_drift.log | cut -c1-200
done
cp "$0" $res/
tar -C /tmp -czf "$OUT/s38d.tar.gz" s38d
