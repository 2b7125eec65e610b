#!/usr/bin/env bash
# Session 35, call E (issue 11): the final code (jobs inline in their queue entries, the
# harness's callbacks without allocation): the default specialize twice (:take8 is the default)
# and one job a take against the GPU alone on the synthetic 2.5M; the real queries; the GPU tests.
set -u
export NCCL_NVLS_ENABLE=0
# The binaries travel gzipped (the working tree and carry stay under 64 MiB).
gunzip -f .gpuhost/s35e/bin/*.gz && chmod +x .gpuhost/s35e/bin/*
export LD_LIBRARY_PATH=/opt/deps/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
GPUSEARCH_BIN=.gpuhost/s35e/bin launch/gpu-host.sh deps > /dev/null 2>&1 || true
bin=.gpuhost/s35e/bin
idx=/tmp/gpusearch-bench-syn2500000
t0=$(date +%s)
if [[ ! -f $idx/manifest.json ]]; then
  timeout 200 $bin/gpusearch -q index --synthetic docs=2500000,seed=7 --out $idx --force > "$OUT/index_build.log" 2>&1
  echo "index exit $? ($(( $(date +%s) - t0 )) s)"
fi
timeout 200 $bin/bench_scheduler --index $idx --out "$OUT/sched_syn.json" \
  --seconds-per-rate 3 --rate-step 1.25 --bisect-to 1.04 --max-runs 6 --start-rate 300000 \
  --configs "gpu,queues-specialize,queues-specialize:take1,queues-specialize:take8" > "$OUT/sched_syn.log" 2>&1
echo "sched exit $? ($(( $(date +%s) - t0 )) s)"
grep -E '^(predictor|[a-z:0-9-]+ +sustain)' "$OUT/sched_syn.log"
ridx=/tmp/gpusearch-debian
timeout 60 $bin/gpusearch -q index --corpus .gpuhost/s35e/data/debian-descriptions.jsonl.gz --out $ridx --force \
  > "$OUT/real_index.log" 2>&1
timeout 100 $bin/bench_scheduler --index $ridx --queries .gpuhost/s35e/data/msmarco-queries-sample/queries.tsv \
  --out "$OUT/sched_real.json" --seconds-per-rate 2 --rate-step 1.25 --bisect-to 1.05 --max-runs 6 \
  --start-rate 400000 --configs "gpu,queues-specialize" > "$OUT/sched_real.log" 2>&1
echo "real exit $? ($(( $(date +%s) - t0 )) s)"
grep -E '^(index|predictor|[a-z:0-9-]+ +sustain)' "$OUT/sched_real.log"
GPUSEARCH_BIN=$bin timeout 190 launch/gpu-host.sh tests > "$OUT/gpu_tests.log" 2>&1
echo "tests exit $? ($(( $(date +%s) - t0 )) s)"
grep -E '^\[  (PASSED|FAILED) ' "$OUT/gpu_tests.log" | sort | uniq -c
cp "$0" "$OUT/"
