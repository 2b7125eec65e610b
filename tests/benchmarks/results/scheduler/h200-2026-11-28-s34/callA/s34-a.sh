#!/usr/bin/env bash
# Prepared in session 33 for session 34's first device call (strip fresh binaries into
# .gpuhost/s34a/bin first: gpu_tests gpusearch bench_scheduler; carry .deps .gpuhost/s34a and
# this script). Issue 11: routing specialize v2 (the GPU's marginal cost within a batch) against
# lone-cost routing and the GPU alone; then the GPU tests.
set -u
export NCCL_NVLS_ENABLE=0 GPUSEARCH_BIN=.gpuhost/s34a/bin
export LD_LIBRARY_PATH=/opt/deps/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
launch/gpu-host.sh deps > /dev/null 2>&1 || true
bin=.gpuhost/s34a/bin
idx=/tmp/gpusearch-bench-syn2500000
t0=$(date +%s)
if [[ ! -f $idx/manifest.json ]]; then
  timeout 200 $bin/gpusearch -q index --synthetic docs=2500000,seed=7 --out $idx --force > "$OUT/index_build.log" 2>&1
  echo "index exit $? ($(( $(date +%s) - t0 )) s)"
fi
timeout 300 $bin/bench_scheduler --index $idx --out "$OUT/sched_specialize2.json" \
  --seconds-per-rate 1 --rate-step 1.5 --bisect-to 1.05 --max-runs 14 \
  --configs "gpu,queues-specialize,queues-lone-cost" > "$OUT/sched_specialize2.log" 2>&1
echo "sched exit $? ($(( $(date +%s) - t0 )) s)"
grep -E '^(predictor|[a-z:0-9-]+ +sustained|queues)' "$OUT/sched_specialize2.log"
timeout 200 launch/gpu-host.sh tests
echo "tests exit $?"
ls -la "$OUT"
