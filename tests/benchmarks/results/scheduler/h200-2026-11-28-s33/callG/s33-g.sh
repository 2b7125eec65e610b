#!/usr/bin/env bash
# Session 33, call G. Issue 11 on the H200: routing `specialize` (the CPU takes the queries of
# lowest predicted CPU/GPU cost ratio below theta; theta down a step at each GPU call that steals
# from the CPU's queue, up at one after an idle CPU worker) against lone-cost routing, with the
# GPU alone. Synthetic 2.5M index, and-or, k 10, 500 ms.
set -u
export NCCL_NVLS_ENABLE=0 GPUSEARCH_BIN=.gpuhost/s33g/bin
export LD_LIBRARY_PATH=/opt/deps/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
launch/gpu-host.sh deps > /dev/null 2>&1 || true
bin=.gpuhost/s33g/bin
idx=/tmp/gpusearch-bench-syn2500000
t0=$(date +%s)
if [[ ! -f $idx/manifest.json ]]; then
  timeout 200 $bin/gpusearch -q index --synthetic docs=2500000,seed=7 --out $idx --force > "$OUT/index_build.log" 2>&1
  echo "index exit $? ($(( $(date +%s) - t0 )) s)"
fi
timeout 300 $bin/bench_scheduler --index $idx --out "$OUT/sched_specialize.json" \
  --seconds-per-rate 1 --rate-step 1.5 --bisect-to 1.05 --max-runs 14 \
  --configs "gpu,queues-specialize,queues-lone-cost" > "$OUT/sched_specialize.log" 2>&1
echo "sched exit $? ($(( $(date +%s) - t0 )) s)"
grep -E '^(predictor|[a-z:0-9-]+ +sustained|queues)' "$OUT/sched_specialize.log"
ls -la "$OUT"
