#!/usr/bin/env bash
# Session 34, call H (issue 11): arrivals in groups; lone cost against specialize (flat, marginal),
# the routings first and the GPU alone last; 3-second runs.
set -u
export NCCL_NVLS_ENABLE=0
export LD_LIBRARY_PATH=/opt/deps/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
GPUSEARCH_BIN=.gpuhost/s34h/bin launch/gpu-host.sh deps > /dev/null 2>&1 || true
bin=.gpuhost/s34h/bin
idx=/tmp/gpusearch-bench-syn2500000
t0=$(date +%s)
if [[ ! -f $idx/manifest.json ]]; then
  timeout 200 $bin/gpusearch -q index --synthetic docs=2500000,seed=7 --out $idx --force > "$OUT/index_build.log" 2>&1
  echo "index exit $? ($(( $(date +%s) - t0 )) s)"
fi
timeout 330 $bin/bench_scheduler --index $idx --out "$OUT/sched_routing.json" \
  --seconds-per-rate 3 --rate-step 1.25 --bisect-to 1.04 --max-runs 8 --start-rate 300000 \
  --configs "queues-specialize,queues-lone-cost,queues-specialize:marginal,gpu" \
  > "$OUT/sched_routing.log" 2>&1
echo "sched exit $? ($(( $(date +%s) - t0 )) s)"
grep -E '^(predictor|[a-z:0-9-]+ +sustain)' "$OUT/sched_routing.log"
cp "$0" "$OUT/"
