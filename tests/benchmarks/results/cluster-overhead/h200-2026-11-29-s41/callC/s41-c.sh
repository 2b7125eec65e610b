#!/usr/bin/env bash
# Session 41, call C (issue 16): the per-shard costs cut (seed skips what the shared threshold
# beats and reuses the cursor's decoded block; first documents published together; run_range's
# vectors reused; windowed unpacking of partial blocks) against HEAD's binaries (call B's,
# `_old`), same clusters interleaved: CPU engine, 1M documents, 240,000 queries, batch 1,024,
# just in time, round-robin shards, one and four ISNs; and-or (3 reps) and or (2 reps). Then the
# in-process twin (bench_shared_shards: one engine on the whole shard against four sharing
# engines at once, 16 threads), without the cluster.
set -u
source launch/device-env.sh .gpuhost/s41c/bin .gpuhost/s41b/bin
t0=$(date +%s)
res=/tmp/s41c; mkdir -p $res
new=$(cd .gpuhost/s41c && pwd); old=$(cd .gpuhost/s41b && pwd)
launch/bench-cluster-overhead.sh --out $res/andor --build $new --before $old --engine cpu \
  --docs 1000000 --queries 240000 --batches 1024 --isns "1 4" --reps 3 --split round-robin \
  --variants "adaptive_old adaptive" --probe-reps 0 --latency-reps 0 > $res/andor.log 2>&1
echo "and-or: exit $? ($(( $(date +%s) - t0 )) s)"; sed -n '/^variant /,/^in process/p' $res/andor.log
grep -E "ISN\(s\) batch" $res/andor.log
$new/bin/bench_shared_shards --whole $res/andor/index --sharded $res/andor/index-s4-round-robin \
  --queries $res/andor/queries.tsv --limit 100000 --threads 16 --configs whole,at-once,whole,at-once \
  --out $res/twin-andor.json > $res/twin-andor.log 2>&1
echo "twin: exit $? ($(( $(date +%s) - t0 )) s)"; cat $res/twin-andor.log
launch/bench-cluster-overhead.sh --out $res/or --build $new --before $old --engine cpu \
  --index $res/andor/index --mode or --queries 240000 --batches 1024 --isns "1 4" --reps 2 --split round-robin \
  --variants "adaptive_old adaptive" --probe-reps 0 --latency-reps 0 > $res/or.log 2>&1
echo "or: exit $? ($(( $(date +%s) - t0 )) s)"; sed -n '/^variant /,/^in process/p' $res/or.log
grep -E "ISN\(s\) batch" $res/or.log
cp "$0" $res/
(cd /tmp && find s41c -type f \( -name '*.json' -o -name '*.log' -o -name '*.txt' -o -name '*.sh' \) -size -20M \
  -not -path '*/index*' -print0 | tar --null -T - -czf "$OUT/s41c.tar.gz")
ls -la "$OUT"
