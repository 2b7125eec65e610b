#!/usr/bin/env bash
# Session 44, call D: query 5300 of call C's index (synthetic 2.5M, seed 7, 100,000 test queries),
# whose k = 1000 GPU answers compare-runs refused at ranks 427-428 in every GPU row. Its runs by
# the GPU engine, the CPU engine and the exhaustive reference, kept to read the near-ties.
set -u
source launch/device-env.sh .gpuhost/s44d/bin
t0=$(date +%s)
res=/tmp/s44d; mkdir -p $res
gs=$GPUSEARCH_BIN/gpusearch
$gs -q index --synthetic "docs=2500000,seed=7,test_queries=100000" --out /tmp/idx > $res/index.log 2>&1
echo "index: exit $? ($(( $(date +%s) - t0 )) s)"
awk -F'\t' '$1 == "5300"' /tmp/idx/queries.test.tsv > $res/q5300.tsv; cat $res/q5300.tsv
for e in gpu cpu reference; do
  timeout 60 $gs -q search --engine $e --index /tmp/idx --queries $res/q5300.tsv --mode and-or --k 1000 --run $res/$e.run > $res/$e.log 2>&1
  echo "$e: exit $? ($(( $(date +%s) - t0 )) s)"
done
for e in gpu cpu; do $gs compare-runs $res/reference.run $res/$e.run | tail -3; done
$gs compare-runs $res/cpu.run $res/gpu.run | tail -3
tar -C /tmp -czf "$OUT/s44d.tar.gz" s44d
