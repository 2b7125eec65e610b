#!/usr/bin/env bash
# Prepared in session 38 for the next device call (issue 10). Calls G and H: at a plan every
# 4,000 served queries the ISN's gate (idle:1:0.02) looked twice in the 24,000-query drifting
# log (the back-off doubles the interval after each withheld plan) and withheld both at 1/10,
# 1/25 and 1/50, where applying every plan won (1.045, 1.079, 1.054). The CPU twin at the
# policy's own cadence (twin-build-machine/c_*.log) reproduces that and says that at the ISN's
# cadence (2,000 served) the gate goes in once on this log with no back-off (second-half hit
# 0.885 against the offline 0.863; back-off 8, the ISN's default: no change, 3 looks) and holds
# on an unchanged mix either way. Here at the ISN's cadence, one query in 4 replayed, one
# thread: the gate with back-off 8 and 1, and every plan; 1/10 and 1/50, 4 rounds each.
# Before it: build, strip and gzip gpusearch, gpu_tests and bench_list_cache into
# .gpuhost/s39a/bin; `launch/gpu-host.sh runtime-debs`; copy this script to .gpuhost/s39-a.sh;
# carry .gpuhost/rt-debs, .gpuhost/s39a and it. About 5 minutes on the H200.
set -u
export NCCL_NVLS_ENABLE=0
export GPUSEARCH_DEBS=.gpuhost/rt-debs
export LD_LIBRARY_PATH=/opt/deps/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export GPUSEARCH_BIN=.gpuhost/s39a/bin  # gzipped: gpu-host.sh unpacks them
launch/gpu-host.sh deps > /dev/null 2>&1 || true
res=/tmp/s39a; mkdir -p $res
t0=$(date +%s)
for ratio in 10 50; do
  OUT=$res/vfb1-ratio$ratio-isn-cadence DRIFT_POLICY=vfb:1 DRIFT_ROUNDS=4 DRIFT_REPLAN=2000 \
    DRIFT_ONLINE="idle:1:0.02:gaps:gaps:8:4,idle:1:0.02:gaps:gaps:1:4,idle:0:0:gaps:gaps:1:4" \
    CACHE_ARGS="--drift-ratio $ratio" timeout 270 launch/gpu-host.sh cache-drift > $res/drift_$ratio.log 2>&1
  echo "ratio $ratio: exit $? ($(( $(date +%s) - t0 )) s)"
  grep -E '^drifting log.*(online|offline)|/ offline|online policy:' $res/vfb1-ratio$ratio-isn-cadence/cache_drift.log | cut -c1-220
  tar -C /tmp -czf "$OUT/s39a.tar.gz" s39a
done
cp "$0" $res/
tar -C /tmp -czf "$OUT/s39a.tar.gz" s39a
