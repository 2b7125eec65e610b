#!/usr/bin/env bash
# Session 33, call C. Issue 11 on the H200: the boosted-tree cost model (--cost-model best, the
# default) against the linear one: the predictor's error on the GPU engine's and the CPU engine's
# costs, and the scheduler's sustained rate (queues, lone-cost routing) with each; the per-query
# cost logs for the offline bound. Synthetic 2.5M index, and-or, k 10, 500 ms deadline.
set -u
export NCCL_NVLS_ENABLE=0 GPUSEARCH_BIN=.gpuhost/s33c/bin
export LD_LIBRARY_PATH=/opt/deps/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
launch/gpu-host.sh deps > /dev/null 2>&1 || true
bin=.gpuhost/s33c/bin
idx=/tmp/gpusearch-bench-syn2500000
t0=$(date +%s)
if [[ ! -f $idx/manifest.json ]]; then
  timeout 200 $bin/gpusearch -q index --synthetic docs=2500000,seed=7 --out $idx --force > "$OUT/index_build.log" 2>&1
  echo "index exit $? ($(( $(date +%s) - t0 )) s)"
fi
for model in best linear; do
  configs="queues-lone-cost"; [[ $model == best ]] && configs="cpu,gpu,queues-lone-cost"
  timeout 200 $bin/bench_scheduler --index $idx --out "$OUT/sched_$model.json" --cost-model $model \
    --seconds-per-rate 1 --rate-step 1.5 --bisect-to 1.05 --max-runs 14 --configs "$configs" \
    --cost-log "$OUT/costs_$model.tsv" > "$OUT/sched_$model.log" 2>&1
  echo "sched $model exit $? ($(( $(date +%s) - t0 )) s)"
  grep -E '^(index|predictor|[a-z-]+ +sustained)' "$OUT/sched_$model.log"
done
ls -la "$OUT"
