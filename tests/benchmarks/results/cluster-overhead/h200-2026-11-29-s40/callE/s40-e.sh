#!/usr/bin/env bash
# Session 40, call E (issue 16): the unions' publications skipped at or below the slot's value
# (after, .gpuhost/s40e) against call C's binaries (before, .gpuhost/s40c), one machine, rounds
# alternating after/before/after/before, 2 reps each: CPU engine, round-robin shards, 1M
# documents, 60,000 queries, batch 1,024, just in time, 1 and 4 ISNs.
set -u
export NCCL_NVLS_ENABLE=0
for b in s40c s40e; do gunzip -f .gpuhost/$b/bin/*.gz; chmod +x .gpuhost/$b/bin/*; done
export LD_LIBRARY_PATH=/opt/deps/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export GPUSEARCH_DEBS=.gpuhost/rt-debs GPUSEARCH_BIN=.gpuhost/s40e/bin
launch/gpu-host.sh deps > /dev/null 2>&1 || true
t0=$(date +%s)
res=/tmp/s40e; mkdir -p $res
export OVERHEAD_QUERIES=60000 OVERHEAD_LATENCY_REPS=0 OVERHEAD_PROBE_REPS=0 \
  OVERHEAD_ENGINES=cpu OVERHEAD_BATCHES=1024 OVERHEAD_ISNS="1 4" OVERHEAD_SPLIT=round-robin
OUT=$res/after1 OVERHEAD_REPS=2 OVERHEAD_VARIANTS=adaptive timeout 150 launch/gpu-host.sh overhead \
  > $res/overhead_after1.log 2>&1
echo "after1: exit $? ($(( $(date +%s) - t0 )) s)"
grep -E "^overhead cpu: adaptive " $res/overhead_after1.log
idx=$res/after1/overhead-cpu/index
for round in before1 after2 before2; do
  b=s40e; [[ $round == before* ]] && b=s40c
  timeout 120 launch/bench-cluster-overhead.sh --out $res/$round --build $PWD/.gpuhost/$b --engine cpu \
    --index $idx --queries 60000 --batches 1024 --isns "1 4" --reps 2 --split round-robin \
    --variants adaptive --probe-reps 0 --latency-reps 0 > $res/overhead_$round.log 2>&1
  echo "$round: exit $? ($(( $(date +%s) - t0 )) s)"
  grep -E "^adaptive " $res/overhead_$round.log
done
cp "$0" $res/
(cd /tmp && find s40e -type f \( -name '*.json' -o -name '*.log' -o -name '*.sh' \) -size -20M \
  -not -path '*/index*' -print0 | tar --null -T - -czf "$OUT/s40e.tar.gz")
ls -la "$OUT"
