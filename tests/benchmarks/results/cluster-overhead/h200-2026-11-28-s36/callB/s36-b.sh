#!/usr/bin/env bash
# Session 36, call B.
# Issue 16 (four ISNs >= one ISN at batch 1,024): round-robin shards against input ranges, CPU
# engine, 1M documents, 60,000 queries, 5 interleaved reps each, one ISN as the same run's base.
# Issue 11: the predictor's cost log on the synthetic 2.5M with each run's work counters (how
# much of the CPU side's error the work itself explains).
set -u
export NCCL_NVLS_ENABLE=0
gunzip -f .gpuhost/s36b/bin/*.gz && chmod +x .gpuhost/s36b/bin/*
export LD_LIBRARY_PATH=/opt/deps/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export GPUSEARCH_BIN=.gpuhost/s36b/bin
launch/gpu-host.sh deps > /dev/null 2>&1 || true
t0=$(date +%s)
res=/tmp/s36b; mkdir -p $res
export OVERHEAD_QUERIES=60000 OVERHEAD_LATENCY_REPS=0 OVERHEAD_PROBE_REPS=0 OVERHEAD_REPS=5 \
  OVERHEAD_ENGINES=cpu OVERHEAD_BATCHES=1024 OVERHEAD_ISNS="1 4" OVERHEAD_VARIANTS=adaptive
for split in round-robin input-ranges; do
  OUT=$res/$split OVERHEAD_SPLIT=$split timeout 230 launch/gpu-host.sh overhead > $res/overhead_$split.log 2>&1
  echo "overhead $split: exit $? ($(( $(date +%s) - t0 )) s)"
  grep -E "^overhead cpu: " $res/overhead_$split.log | head -30
done
bin=.gpuhost/s36b/bin
idx=/tmp/gpusearch-bench-syn2500000
timeout 100 $bin/gpusearch -q index --synthetic docs=2500000,seed=7 --out $idx --force > $res/index_build.log 2>&1
timeout 90 $bin/bench_scheduler --index $idx --out $res/costlog.json --configs '' --limit 2000 \
  --train-limit 1000 --cost-log $res/costs_syn2500000.tsv > $res/costlog.log 2>&1
echo "cost log: exit $? ($(( $(date +%s) - t0 )) s)"
grep predictor $res/costlog.log
cp "$0" $res/
(cd /tmp && find s36b -type f \( -name '*.json' -o -name '*.log' -o -name '*.tsv' -o -name '*.md' \
  -o -name '*.txt' -o -name '*.sh' \) -size -20M -not -path '*/index*' -print0 |
  tar --null -T - -czf "$OUT/s36b.tar.gz")
ls -la "$OUT"
