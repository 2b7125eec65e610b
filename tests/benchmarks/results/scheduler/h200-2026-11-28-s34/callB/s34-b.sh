#!/usr/bin/env bash
# Session 34, call B (issue 11): is the co-processing host oversubscribed? The GPU engine's
# parallel pack/unpack (TBB, every core) against 8 CPU workers: busy wall vs on-thread time, and
# TBB capped (:hostN) or more CPU workers (:cpuW).
set -u
export NCCL_NVLS_ENABLE=0
export LD_LIBRARY_PATH=/opt/deps/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
GPUSEARCH_BIN=.gpuhost/s34b/bin launch/gpu-host.sh deps > /dev/null 2>&1 || true
bin=.gpuhost/s34b/bin
idx=/tmp/gpusearch-bench-syn2500000
t0=$(date +%s)
if [[ ! -f $idx/manifest.json ]]; then
  timeout 200 $bin/gpusearch -q index --synthetic docs=2500000,seed=7 --out $idx --force > "$OUT/index_build.log" 2>&1
  echo "index exit $? ($(( $(date +%s) - t0 )) s)"
fi
timeout 420 $bin/bench_scheduler --index $idx --out "$OUT/sched_host.json" \
  --seconds-per-rate 1 --rate-step 1.5 --bisect-to 1.05 --max-runs 12 --start-rate 150000 \
  --configs "gpu,queues-specialize,queues-specialize:host8,queues-specialize:host6:cpu10,queues-lone-cost:host8" \
  > "$OUT/sched_host.log" 2>&1
echo "sched exit $? ($(( $(date +%s) - t0 )) s)"
grep -E '^(predictor|[a-z:0-9-]+ +sustain)' "$OUT/sched_host.log"
cp "$0" "$OUT/"
