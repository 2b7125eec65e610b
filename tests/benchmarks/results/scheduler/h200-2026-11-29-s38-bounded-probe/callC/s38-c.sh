#!/usr/bin/env bash
# Session 38, call C (issues 10 and 11). Bins: .gpuhost/s38a/bin (gpusearch, gpu_tests,
# bench_list_cache) and .gpuhost/s38b/bin (bench_scheduler); data in .gpuhost/s38c/data.
# 1. Issue 10: is the online arm's ~2% shortfall at vfb 1/10 the planner's presence or its
#    swaps? A third arm runs the planner but its gate withholds every plan (min payoff 1e12).
# 2. Issue 11: the and-or probe at 64 blocks against off, a second pair on the synthetic 2.5M
#    (reversed order), a 256-block point, and the real queries (MS MARCO sample on Debian
#    descriptions) off and at 64, 2 submitting threads each.
set -u
export NCCL_NVLS_ENABLE=0
export GPUSEARCH_DEBS=.gpuhost/rt-debs  # the runtime .debs alone: the call is near the 64 MiB limit
gunzip -f .gpuhost/s38a/bin/*.gz .gpuhost/s38b/bin/*.gz; chmod +x .gpuhost/s38a/bin/* .gpuhost/s38b/bin/*
cp .gpuhost/s38b/bin/bench_scheduler .gpuhost/s38a/bin/
export LD_LIBRARY_PATH=/opt/deps/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export GPUSEARCH_BIN=.gpuhost/s38a/bin
bin=.gpuhost/s38a/bin
launch/gpu-host.sh deps > /dev/null 2>&1 || true
res=/tmp/s38c; mkdir -p $res
t0=$(date +%s)
OUT=$res/vfb1-ratio10-gate DRIFT_POLICY=vfb:1 DRIFT_ROUNDS=4 \
  DRIFT_ONLINE="idle:0:0:gaps:gaps,idle:1e12:0:gaps:gaps" \
  CACHE_ARGS="--drift-ratio 10" timeout 200 launch/gpu-host.sh cache-drift > $res/drift_vfb1_10.log 2>&1
echo "vfb:1 at 1/10 with a withheld-plans arm: exit $? ($(( $(date +%s) - t0 )) s)"
grep -E '^drifting log.*(online|offline)|/ offline' $res/vfb1-ratio10-gate/cache_drift.log | cut -c1-200
idx=/tmp/gpusearch-bench-syn2500000
[[ -f $idx/manifest.json ]] || timeout 120 $bin/gpusearch -q index --synthetic docs=2500000,seed=7 \
  --out $idx --force > $res/index_build.log 2>&1
for probe in 64 0 256; do
  timeout 75 $bin/bench_scheduler --index $idx --out $res/sched_syn_probe$probe.json --seconds-per-rate 3 \
    --rate-step 1.25 --bisect-to 1.04 --max-runs 6 --start-rate 300000 --submit-threads 2 \
    --and-probe $probe --cost-log $res/costs_syn_probe$probe.tsv --configs "gpu,queues-specialize" \
    > $res/sched_syn_probe$probe.log 2>&1
  echo "synthetic, probe $probe: exit $? ($(( $(date +%s) - t0 )) s)"
  grep -E '^(predictor|[a-z:0-9-]+ +sustain)' $res/sched_syn_probe$probe.log
done
ridx=/tmp/gpusearch-debian
timeout 60 $bin/gpusearch -q index --corpus .gpuhost/s38c/data/debian-descriptions.jsonl.gz --out $ridx --force \
  > $res/real_index.log 2>&1
for probe in 0 64; do
  timeout 60 $bin/bench_scheduler --index $ridx --queries .gpuhost/s38c/data/msmarco-queries-sample/queries.tsv \
    --out $res/sched_real_probe$probe.json --seconds-per-rate 2 --rate-step 1.25 --bisect-to 1.05 \
    --max-runs 6 --start-rate 500000 --submit-threads 2 --and-probe $probe \
    --cost-log $res/costs_real_probe$probe.tsv --configs "gpu,queues-specialize" \
    > $res/sched_real_probe$probe.log 2>&1
  echo "real, probe $probe: exit $? ($(( $(date +%s) - t0 )) s)"
  grep -E '^(predictor|[a-z:0-9-]+ +sustain)' $res/sched_real_probe$probe.log
done
cp "$0" $res/
tar -C /tmp -czf "$OUT/s38c.tar.gz" s38c
