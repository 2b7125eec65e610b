#!/usr/bin/env bash
# Session 33, call F. Issue 11 on the H200: capacity routing decided by relative advantage for
# every query (--close-fraction 1: the CPU takes the queries of lowest CPU/GPU cost ratio, theta
# balancing the two waits) against its default (0.2: earliest expected completion first), with
# the GPU alone and lone-cost routing in the same run. Synthetic 2.5M index, and-or, k 10, 500 ms.
set -u
export NCCL_NVLS_ENABLE=0 GPUSEARCH_BIN=.gpuhost/s33f/bin
export LD_LIBRARY_PATH=/opt/deps/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
launch/gpu-host.sh deps > /dev/null 2>&1 || true
bin=.gpuhost/s33f/bin
idx=/tmp/gpusearch-bench-syn2500000
t0=$(date +%s)
if [[ ! -f $idx/manifest.json ]]; then
  timeout 200 $bin/gpusearch -q index --synthetic docs=2500000,seed=7 --out $idx --force > "$OUT/index_build.log" 2>&1
  echo "index exit $? ($(( $(date +%s) - t0 )) s)"
fi
for close in 1 0.2; do
  configs="queues"; [[ $close == 1 ]] && configs="gpu,queues,queues-lone-cost"
  timeout 220 $bin/bench_scheduler --index $idx --out "$OUT/sched_close$close.json" \
    --seconds-per-rate 1 --rate-step 1.5 --bisect-to 1.05 --max-runs 14 --close-fraction $close \
    --configs "$configs" > "$OUT/sched_close$close.log" 2>&1
  echo "sched close $close exit $? ($(( $(date +%s) - t0 )) s)"
  grep -E '^(predictor|[a-z:0-9-]+ +sustained|queues)' "$OUT/sched_close$close.log" | sed "s/^/close $close: /"
done
ls -la "$OUT"
