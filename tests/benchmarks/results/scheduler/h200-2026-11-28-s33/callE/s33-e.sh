#!/usr/bin/env bash
# Session 33, call E. Issue 11 on the H200: as call D, with the CPU's pick window applied to
# urgent jobs too (rule a: the cheapest urgent job within the window, not the oldest); lone-cost
# routing with N = 1, 32 and 8; the GPU alone as the baseline. Synthetic 2.5M index, and-or,
# k 10, 500 ms deadline.
set -u
export NCCL_NVLS_ENABLE=0 GPUSEARCH_BIN=.gpuhost/s33e/bin
export LD_LIBRARY_PATH=/opt/deps/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
launch/gpu-host.sh deps > /dev/null 2>&1 || true
bin=.gpuhost/s33e/bin
idx=/tmp/gpusearch-bench-syn2500000
t0=$(date +%s)
if [[ ! -f $idx/manifest.json ]]; then
  timeout 200 $bin/gpusearch -q index --synthetic docs=2500000,seed=7 --out $idx --force > "$OUT/index_build.log" 2>&1
  echo "index exit $? ($(( $(date +%s) - t0 )) s)"
fi
timeout 330 $bin/bench_scheduler --index $idx --out "$OUT/sched_pick.json" \
  --seconds-per-rate 1 --rate-step 1.5 --bisect-to 1.05 --max-runs 14 \
  --configs "gpu,queues-lone-cost:pick1,queues-lone-cost:pick32,queues-lone-cost:pick8" \
  > "$OUT/sched_pick.log" 2>&1
echo "sched pick exit $? ($(( $(date +%s) - t0 )) s)"
grep -E '^(index|predictor|[a-z:0-9-]+ +sustained|queues)' "$OUT/sched_pick.log"
ls -la "$OUT"
