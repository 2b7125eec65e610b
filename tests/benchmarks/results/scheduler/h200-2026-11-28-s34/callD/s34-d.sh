#!/usr/bin/env bash
# Session 34, call D (issue 11): the perfect-split bound, measured (tests/benchmarks/split_bound.hpp):
# CPU workers and the GPU answering fixed shares of the 2.5M index's test queries at once.
set -u
export NCCL_NVLS_ENABLE=0
export LD_LIBRARY_PATH=/opt/deps/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
GPUSEARCH_BIN=.gpuhost/s34d/bin launch/gpu-host.sh deps > /dev/null 2>&1 || true
bin=.gpuhost/s34d/bin
idx=/tmp/gpusearch-bench-syn2500000
t0=$(date +%s)
if [[ ! -f $idx/manifest.json ]]; then
  timeout 200 $bin/gpusearch -q index --synthetic docs=2500000,seed=7 --out $idx --force > "$OUT/index_build.log" 2>&1
  echo "index exit $? ($(( $(date +%s) - t0 )) s)"
fi
for w in 8 12; do
  timeout 200 $bin/bench_scheduler --index $idx --out "$OUT/split_w$w.json" --configs "" \
    --split-bound 1 --cpu-workers $w > "$OUT/split_w$w.log" 2>&1
  echo "split w$w exit $? ($(( $(date +%s) - t0 )) s)"
  grep -E 'predictor|best|alone \(' "$OUT/split_w$w.log"
done
cp "$0" "$OUT/"
