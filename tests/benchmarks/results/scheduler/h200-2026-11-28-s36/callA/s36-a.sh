#!/usr/bin/env bash
# Prepared in session 35 for the next device call (issue 11). Before it: build, strip and gzip
# gpusearch and bench_scheduler into .gpuhost/s36a/bin (the working tree plus carry must stay
# under 64 MiB: gzip them), copy the Debian corpus and the MS MARCO sample into
# .gpuhost/s36a/data, copy this script to .gpuhost/s36-a.sh; carry .deps .gpuhost/s36a and it.
# The device tool returns at most 8 files a call: the results go in one tarball.
# What it measures: the real queries with 1, 2 and 4 submitting threads (one thread capped the
# GPU alone near 0.9M q/s, against its 1.96M in full batches), the GPU alone and the default
# scheduler; then the synthetic 2.5M's default against the GPU alone, with 2 submitting threads.
set -u
export NCCL_NVLS_ENABLE=0
gunzip -f .gpuhost/s36a/bin/*.gz && chmod +x .gpuhost/s36a/bin/*
export LD_LIBRARY_PATH=/opt/deps/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
GPUSEARCH_BIN=.gpuhost/s36a/bin launch/gpu-host.sh deps > /dev/null 2>&1 || true
bin=.gpuhost/s36a/bin
res=/tmp/s36a; mkdir -p $res
t0=$(date +%s)
ridx=/tmp/gpusearch-debian
timeout 60 $bin/gpusearch -q index --corpus .gpuhost/s36a/data/debian-descriptions.jsonl.gz --out $ridx --force \
  > $res/real_index.log 2>&1
for threads in 1 2 4; do
  timeout 100 $bin/bench_scheduler --index $ridx --queries .gpuhost/s36a/data/msmarco-queries-sample/queries.tsv \
    --out $res/sched_real_t$threads.json --seconds-per-rate 2 --rate-step 1.25 --bisect-to 1.05 \
    --max-runs 6 --start-rate 500000 --submit-threads $threads --configs "gpu,queues-specialize" \
    > $res/sched_real_t$threads.log 2>&1
  echo "real, $threads submitting threads: exit $? ($(( $(date +%s) - t0 )) s)"
  grep -E '^[a-z:0-9-]+ +sustain' $res/sched_real_t$threads.log
done
idx=/tmp/gpusearch-bench-syn2500000
[[ -f $idx/manifest.json ]] || timeout 120 $bin/gpusearch -q index --synthetic docs=2500000,seed=7 \
  --out $idx --force > $res/index_build.log 2>&1
timeout 150 $bin/bench_scheduler --index $idx --out $res/sched_syn_t2.json --seconds-per-rate 3 \
  --rate-step 1.25 --bisect-to 1.04 --max-runs 6 --start-rate 300000 --submit-threads 2 \
  --configs "gpu,queues-specialize" > $res/sched_syn_t2.log 2>&1
echo "synthetic, 2 submitting threads: exit $? ($(( $(date +%s) - t0 )) s)"
grep -E '^(predictor|[a-z:0-9-]+ +sustain)' $res/sched_syn_t2.log
cp "$0" $res/
tar -C /tmp -czf "$OUT/s36a.tar.gz" s36a
