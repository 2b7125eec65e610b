#!/usr/bin/env bash
# Session 41, call E (issue 16): sharing and-or engine calls in one pass (AND phases then OR
# phases from one counter, no barrier between them) against call D's binaries (c87cfc3, `_old`),
# interleaved: CPU engine, 1M documents, 240,000 queries, batch 1,024, just in time, round-robin
# shards, one and four ISNs, 4 reps; then the in-process twin (16 threads, 2 reps).
set -u
source launch/device-env.sh .gpuhost/s41e/bin .gpuhost/s41d/bin
t0=$(date +%s)
res=/tmp/s41e; mkdir -p $res
new=$(cd .gpuhost/s41e && pwd); old=$(cd .gpuhost/s41d && pwd)
pack() { cp "$0" $res/; (cd /tmp && find s41e -type f \( -name '*.json' -o -name '*.log' -o -name '*.txt' -o -name '*.sh' \) \
  -size -20M -not -path '*/index*' -print0 | tar --null -T - -czf "$OUT/s41e.tar.gz"); }
launch/bench-cluster-overhead.sh --out $res/andor --build $new --before $old --engine cpu \
  --docs 1000000 --queries 240000 --batches 1024 --isns "1 4" --reps 4 --split round-robin \
  --variants "adaptive_old adaptive" --probe-reps 0 --latency-reps 0 > $res/andor.log 2>&1
echo "and-or: exit $? ($(( $(date +%s) - t0 )) s)"; sed -n '/^variant /,/^in process/p' $res/andor.log
grep -E "ISN\(s\) batch" $res/andor.log; pack
$new/bin/bench_shared_shards --whole $res/andor/index --sharded $res/andor/index-s4-round-robin \
  --queries $res/andor/queries.tsv --limit 100000 --threads 16 --configs whole,at-once --reps 2 \
  --out $res/twin-andor.json > $res/twin-andor.log 2>&1
echo "twin: exit $? ($(( $(date +%s) - t0 )) s)"; cat $res/twin-andor.log
pack; ls -la "$OUT"
