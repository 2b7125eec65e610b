#!/usr/bin/env bash
# Session 34, call I (issue 11): the real queries (MS MARCO sample on Debian descriptions) with
# arrivals in groups: CPU only, GPU only, specialize (the new default) and lone cost; 2-second runs.
set -u
export NCCL_NVLS_ENABLE=0
export LD_LIBRARY_PATH=/opt/deps/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
GPUSEARCH_BIN=.gpuhost/s34i/bin launch/gpu-host.sh deps > /dev/null 2>&1 || true
bin=.gpuhost/s34i/bin
ridx=/tmp/gpusearch-debian
t0=$(date +%s)
timeout 60 $bin/gpusearch -q index --corpus .gpuhost/s34i/data/debian-descriptions.jsonl.gz --out $ridx --force \
  > "$OUT/real_index.log" 2>&1
echo "index exit $? ($(( $(date +%s) - t0 )) s)"
timeout 170 $bin/bench_scheduler --index $ridx --queries .gpuhost/s34i/data/msmarco-queries-sample/queries.tsv \
  --out "$OUT/sched_real.json" --seconds-per-rate 2 --rate-step 1.3 --bisect-to 1.05 --max-runs 7 \
  --configs "cpu,gpu,queues-specialize,queues-lone-cost" > "$OUT/sched_real.log" 2>&1
echo "sched exit $? ($(( $(date +%s) - t0 )) s)"
grep -E '^(index|predictor|[a-z:0-9-]+ +sustain)' "$OUT/sched_real.log"
cp "$0" "$OUT/"
