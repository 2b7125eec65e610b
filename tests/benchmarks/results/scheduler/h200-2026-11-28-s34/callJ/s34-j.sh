#!/usr/bin/env bash
# Session 34, call J (issue 11; the last of the session's device time): timelines and lock
# stats of specialize with and without balance_waits, and the GPU alone; 3-second runs.
set -u
export NCCL_NVLS_ENABLE=0
export LD_LIBRARY_PATH=/opt/deps/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
GPUSEARCH_BIN=.gpuhost/s34j/bin launch/gpu-host.sh deps > /dev/null 2>&1 || true
bin=.gpuhost/s34j/bin
idx=/tmp/gpusearch-bench-syn2500000
t0=$(date +%s)
if [[ ! -f $idx/manifest.json ]]; then
  timeout 100 $bin/gpusearch -q index --synthetic docs=2500000,seed=7 --out $idx --force > "$OUT/index_build.log" 2>&1
  echo "index exit $? ($(( $(date +%s) - t0 )) s)"
fi
timeout 110 $bin/bench_scheduler --index $idx --out "$OUT/sched_timeline.json" --timeline-ms 10 \
  --seconds-per-rate 3 --rate-step 1.12 --bisect-to 1.05 --max-runs 4 --start-rate 340000 \
  --configs "queues-specialize:balance,queues-specialize,gpu" > "$OUT/sched_timeline.log" 2>&1
echo "sched exit $? ($(( $(date +%s) - t0 )) s)"
grep -E '^(predictor|[a-z:0-9-]+ +sustain)' "$OUT/sched_timeline.log"
cp "$0" "$OUT/"
