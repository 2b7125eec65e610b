#!/usr/bin/env bash
# Prepared in session 34 for session 35's first device call (strip fresh binaries into
# .gpuhost/s35a/bin first: gpusearch bench_scheduler gpu_tests; copy the Debian corpus and the MS
# MARCO sample into .gpuhost/s35a/data as in call I; carry .deps .gpuhost/s35a and this script).
# Issue 11: why specialize misses deadlines with neither processor saturated: timelines of
# specialize and lone cost on the 2.5M index (plot with launch/plot-sched-timeline.py), then the
# real queries with the fixed rate climb; then the GPU tests (about 7-8 minutes in all; the
# steps' timeouts keep a slow step from taking the GPU tests' time).
set -u
export NCCL_NVLS_ENABLE=0
export LD_LIBRARY_PATH=/opt/deps/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
GPUSEARCH_BIN=.gpuhost/s35a/bin launch/gpu-host.sh deps > /dev/null 2>&1 || true
bin=.gpuhost/s35a/bin
idx=/tmp/gpusearch-bench-syn2500000
t0=$(date +%s)
if [[ ! -f $idx/manifest.json ]]; then
  timeout 200 $bin/gpusearch -q index --synthetic docs=2500000,seed=7 --out $idx --force > "$OUT/index_build.log" 2>&1
  echo "index exit $? ($(( $(date +%s) - t0 )) s)"
fi
timeout 220 $bin/bench_scheduler --index $idx --out "$OUT/sched_timeline.json" --timeline-ms 10 \
  --seconds-per-rate 3 --rate-step 1.25 --bisect-to 1.04 --max-runs 6 --start-rate 300000 \
  --configs "gpu,queues-specialize,queues-specialize:balance,queues-specialize:balance:chain,queues-lone-cost" > "$OUT/sched_timeline.log" 2>&1
echo "sched exit $? ($(( $(date +%s) - t0 )) s)"
grep -E '^(predictor|[a-z:0-9-]+ +sustain)' "$OUT/sched_timeline.log"
ridx=/tmp/gpusearch-debian
timeout 60 $bin/gpusearch -q index --corpus .gpuhost/s35a/data/debian-descriptions.jsonl.gz --out $ridx --force \
  > "$OUT/real_index.log" 2>&1
timeout 120 $bin/bench_scheduler --index $ridx --queries .gpuhost/s35a/data/msmarco-queries-sample/queries.tsv \
  --out "$OUT/sched_real.json" --seconds-per-rate 2 --rate-step 1.3 --bisect-to 1.05 --max-runs 6 \
  --configs "cpu,gpu,queues-specialize,queues-lone-cost" > "$OUT/sched_real.log" 2>&1
echo "real exit $? ($(( $(date +%s) - t0 )) s)"
grep -E '^(index|predictor|[a-z:0-9-]+ +sustain)' "$OUT/sched_real.log"
if [[ -x $bin/gpu_tests ]]; then GPUSEARCH_BIN=$bin timeout 190 launch/gpu-host.sh tests; echo "tests exit $?"; fi
cp "$0" "$OUT/"
