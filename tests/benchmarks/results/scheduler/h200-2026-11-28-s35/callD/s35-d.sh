#!/usr/bin/env bash
# Session 35, call D (issue 11): paper 001's Figure 7 on the synthetic 2.5M index with the final
# code (takes of up to 8, balance waits by default, the inline queue entries): cpu, gpu,
# best-serial, lbd, queues-lone-cost, queues (capacity), queues-specialize (the default); then
# the GPU tests.
set -u
export NCCL_NVLS_ENABLE=0
# The binaries travel gzipped (the working tree and carry stay under 64 MiB).
gunzip -f .gpuhost/s35d/bin/*.gz && chmod +x .gpuhost/s35d/bin/*
export LD_LIBRARY_PATH=/opt/deps/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
GPUSEARCH_BIN=.gpuhost/s35d/bin launch/gpu-host.sh deps > /dev/null 2>&1 || true
bin=.gpuhost/s35d/bin
idx=/tmp/gpusearch-bench-syn2500000
t0=$(date +%s)
if [[ ! -f $idx/manifest.json ]]; then
  timeout 200 $bin/gpusearch -q index --synthetic docs=2500000,seed=7 --out $idx --force > "$OUT/index_build.log" 2>&1
  echo "index exit $? ($(( $(date +%s) - t0 )) s)"
fi
timeout 330 $bin/bench_scheduler --index $idx --out "$OUT/fig7_syn.json" \
  --seconds-per-rate 3 --rate-step 1.25 --bisect-to 1.05 --max-runs 6 --start-rate 100000 \
  > "$OUT/fig7_syn.log" 2>&1
echo "fig7 exit $? ($(( $(date +%s) - t0 )) s)"
grep -E '^(predictor|[a-z:0-9-]+ +sustain)' "$OUT/fig7_syn.log"
GPUSEARCH_BIN=$bin timeout 200 launch/gpu-host.sh tests > "$OUT/gpu_tests.log" 2>&1
echo "tests exit $? ($(( $(date +%s) - t0 )) s)"
grep -E '^\[  (PASSED|FAILED|SKIPPED) ' "$OUT/gpu_tests.log" | head -20
cp "$0" "$OUT/"
