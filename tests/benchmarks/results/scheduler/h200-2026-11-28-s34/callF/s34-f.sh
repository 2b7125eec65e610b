#!/usr/bin/env bash
# Session 34, call F (issue 11): arrivals submitted in groups (submit_many) against one at a time
# (:single, calls A-E), with the submitting thread's lag; 3-second runs.
set -u
export NCCL_NVLS_ENABLE=0
export LD_LIBRARY_PATH=/opt/deps/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
GPUSEARCH_BIN=.gpuhost/s34f/bin launch/gpu-host.sh deps > /dev/null 2>&1 || true
bin=.gpuhost/s34f/bin
idx=/tmp/gpusearch-bench-syn2500000
t0=$(date +%s)
if [[ ! -f $idx/manifest.json ]]; then
  timeout 200 $bin/gpusearch -q index --synthetic docs=2500000,seed=7 --out $idx --force > "$OUT/index_build.log" 2>&1
  echo "index exit $? ($(( $(date +%s) - t0 )) s)"
fi
timeout 480 $bin/bench_scheduler --index $idx --out "$OUT/sched_groups.json" \
  --seconds-per-rate 3 --rate-step 1.25 --bisect-to 1.04 --max-runs 8 --start-rate 300000 \
  --configs "gpu,queues-specialize,queues-specialize:marginal,queues-lone-cost,queues-specialize:single" \
  > "$OUT/sched_groups.log" 2>&1
echo "sched exit $? ($(( $(date +%s) - t0 )) s)"
grep -E '^(predictor|[a-z:0-9-]+ +sustain)' "$OUT/sched_groups.log"
cp "$0" "$OUT/"
