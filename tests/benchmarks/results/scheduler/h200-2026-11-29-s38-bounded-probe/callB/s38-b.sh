#!/usr/bin/env bash
# Prepared in session 37 for a next device call (issue 11): the and-or probe bounded to 16 and
# 64 blocks (session 37 call B: unbounded, 19 us a query at 2.5M documents, cut the sustained
# rate from 1.40x to 1.15x the GPU alone). Same settings as call B: the synthetic 2.5M, 2
# submitting threads, the GPU alone and queues-specialize. Before it: build, strip and gzip
# gpusearch and bench_scheduler into .gpuhost/s38b/bin; copy this script to .gpuhost/s38-b.sh;
# carry .deps, .gpuhost/s38b and it. About 4 minutes on the H200.
set -u
export NCCL_NVLS_ENABLE=0
gunzip -f .gpuhost/s38b/bin/*.gz && chmod +x .gpuhost/s38b/bin/*
export LD_LIBRARY_PATH=/opt/deps/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
GPUSEARCH_BIN=.gpuhost/s38b/bin launch/gpu-host.sh deps > /dev/null 2>&1 || true
bin=.gpuhost/s38b/bin
res=/tmp/s38b; mkdir -p $res
t0=$(date +%s)
idx=/tmp/gpusearch-bench-syn2500000
[[ -f $idx/manifest.json ]] || timeout 120 $bin/gpusearch -q index --synthetic docs=2500000,seed=7 \
  --out $idx --force > $res/index_build.log 2>&1
for probe in 16 64; do
  timeout 200 $bin/bench_scheduler --index $idx --out $res/sched_probe$probe.json --seconds-per-rate 3 \
    --rate-step 1.25 --bisect-to 1.04 --max-runs 6 --start-rate 300000 --submit-threads 2 \
    --and-probe $probe --cost-log $res/costs_probe$probe.tsv --configs "gpu,queues-specialize" \
    > $res/sched_probe$probe.log 2>&1
  echo "probe $probe: exit $? ($(( $(date +%s) - t0 )) s)"
  grep -E '^(predictor|[a-z:0-9-]+ +sustain)' $res/sched_probe$probe.log
done
cp "$0" $res/
tar -C /tmp -czf "$OUT/s38b.tar.gz" s38b
