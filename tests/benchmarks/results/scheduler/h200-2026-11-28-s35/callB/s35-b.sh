#!/usr/bin/env bash
# Session 35, call B (issue 11): lone takes (a CPU worker takes up to 8 jobs per lock,
# SchedulerOptions::lone_jobs_per_take) against one job a take (:take1), with and without
# balance waits and chaining; synthetic 2.5M, then the real queries.
set -u
export NCCL_NVLS_ENABLE=0
export LD_LIBRARY_PATH=/opt/deps/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
GPUSEARCH_BIN=.gpuhost/s35b/bin launch/gpu-host.sh deps > /dev/null 2>&1 || true
bin=.gpuhost/s35b/bin
idx=/tmp/gpusearch-bench-syn2500000
t0=$(date +%s)
if [[ ! -f $idx/manifest.json ]]; then
  timeout 200 $bin/gpusearch -q index --synthetic docs=2500000,seed=7 --out $idx --force > "$OUT/index_build.log" 2>&1
  echo "index exit $? ($(( $(date +%s) - t0 )) s)"
fi
timeout 260 $bin/bench_scheduler --index $idx --out "$OUT/sched_syn.json" \
  --seconds-per-rate 3 --rate-step 1.25 --bisect-to 1.04 --max-runs 6 --start-rate 300000 \
  --configs "gpu,queues-specialize:take1,queues-specialize,queues-specialize:balance:take1,queues-specialize:balance,queues-specialize:balance:chain" > "$OUT/sched_syn.log" 2>&1
echo "sched exit $? ($(( $(date +%s) - t0 )) s)"
grep -E '^(predictor|[a-z:0-9-]+ +sustain)' "$OUT/sched_syn.log"
ridx=/tmp/gpusearch-debian
timeout 60 $bin/gpusearch -q index --corpus .gpuhost/s35b/data/debian-descriptions.jsonl.gz --out $ridx --force \
  > "$OUT/real_index.log" 2>&1
timeout 150 $bin/bench_scheduler --index $ridx --queries .gpuhost/s35b/data/msmarco-queries-sample/queries.tsv \
  --out "$OUT/sched_real.json" --seconds-per-rate 2 --rate-step 1.3 --bisect-to 1.05 --max-runs 6 \
  --configs "cpu,gpu,queues-specialize:take1,queues-specialize,queues-specialize:balance" > "$OUT/sched_real.log" 2>&1
echo "real exit $? ($(( $(date +%s) - t0 )) s)"
grep -E '^(index|predictor|[a-z:0-9-]+ +sustain)' "$OUT/sched_real.log"
cp "$0" "$OUT/"
