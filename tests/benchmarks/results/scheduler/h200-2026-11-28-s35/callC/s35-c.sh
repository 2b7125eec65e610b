#!/usr/bin/env bash
# Session 35, call C (issue 11): the new defaults (lone takes of up to 8, balance waits counting
# a CPU worker asleep) against :steals and :take1 on the synthetic 2.5M; the predictor in and
# mode; on the real queries the split bound, then the configurations.
set -u
export NCCL_NVLS_ENABLE=0
export LD_LIBRARY_PATH=/opt/deps/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
GPUSEARCH_BIN=.gpuhost/s35c/bin launch/gpu-host.sh deps > /dev/null 2>&1 || true
bin=.gpuhost/s35c/bin
idx=/tmp/gpusearch-bench-syn2500000
t0=$(date +%s)
if [[ ! -f $idx/manifest.json ]]; then
  timeout 200 $bin/gpusearch -q index --synthetic docs=2500000,seed=7 --out $idx --force > "$OUT/index_build.log" 2>&1
  echo "index exit $? ($(( $(date +%s) - t0 )) s)"
fi
timeout 200 $bin/bench_scheduler --index $idx --out "$OUT/sched_syn.json" \
  --seconds-per-rate 3 --rate-step 1.25 --bisect-to 1.04 --max-runs 6 --start-rate 300000 \
  --configs "gpu,queues-specialize,queues-specialize:steals,queues-specialize:take1" > "$OUT/sched_syn.log" 2>&1
echo "sched exit $? ($(( $(date +%s) - t0 )) s)"
grep -E '^(predictor|[a-z:0-9-]+ +sustain)' "$OUT/sched_syn.log"
timeout 60 $bin/bench_scheduler --index $idx --out "$OUT/pred_and.json" --mode and --configs '' \
  > "$OUT/pred_and.log" 2>&1
echo "and-mode predictor exit $? ($(( $(date +%s) - t0 )) s)"
grep -E '^predictor' "$OUT/pred_and.log"
ridx=/tmp/gpusearch-debian
timeout 60 $bin/gpusearch -q index --corpus .gpuhost/s35c/data/debian-descriptions.jsonl.gz --out $ridx --force \
  > "$OUT/real_index.log" 2>&1
timeout 170 $bin/bench_scheduler --index $ridx --queries .gpuhost/s35c/data/msmarco-queries-sample/queries.tsv \
  --out "$OUT/sched_real.json" --seconds-per-rate 2 --rate-step 1.3 --bisect-to 1.05 --max-runs 7 \
  --split-bound 1 --configs "gpu,queues-specialize,queues-specialize:take1" > "$OUT/sched_real.log" 2>&1
echo "real exit $? ($(( $(date +%s) - t0 )) s)"
grep -E '^(index|predictor|split|bound|[a-z:0-9-]+ +sustain)' "$OUT/sched_real.log"
cp "$0" "$OUT/"
