#!/usr/bin/env bash
# Session 42, call B (issue 16): sharing ISNs' threads take a batch's queries in batch order
# (--share-in-order, new, default on) against oneTBB's recursive split (_noorder). The in-process
# twin (bench_shared_shards, 16 threads: whole, at once, lockstep; in order on and off), then the
# cluster: four ISNs against one at batch 1,024 (CPU engine, 1M documents, 240,000 queries,
# and-or, just in time, round-robin shards, 4 interleaved reps).
set -u
source launch/device-env.sh .gpuhost/s42b/bin
t0=$(date +%s)
res=/tmp/s42b; mkdir -p $res
new=$(cd .gpuhost/s42b && pwd)
pack() { cp "$0" $res/; (cd /tmp && find s42b -type f \( -name '*.json' -o -name '*.log' -o -name '*.txt' -o -name '*.sh' \) \
  -size -20M -not -path '*/index*' -print0 | tar --null -T - -czf "$OUT/s42b.tar.gz"); }
idx=$res/b1024/index; mkdir -p $res/b1024
$new/bin/gpusearch -q index --synthetic "docs=1000000,seed=7,test_queries=240000" --out $idx > $res/index.log 2>&1
$new/bin/gpusearch -q partition --index $idx --out $res/b1024/index-s4-round-robin --shards 4 --split round-robin --force >> $res/index.log 2>&1
echo "index: $(( $(date +%s) - t0 )) s"
for rep in 1 2; do for o in on off; do
  $new/bin/bench_shared_shards --whole $idx --sharded $res/b1024/index-s4-round-robin \
    --queries $idx/queries.test.tsv --limit 100000 --threads 16 --configs whole,at-once,lockstep \
    --in-order $o --out $res/twin-$o-$rep.json 2>&1 | sed "s/^/in-order $o: /" | tee -a $res/twin.log
done; done
echo "twin: $(( $(date +%s) - t0 )) s"; pack
launch/bench-cluster-overhead.sh --out $res/b1024 --build $new --engine cpu \
  --index $idx --queries 240000 --batches 1024 --isns "1 4" --reps 4 --split round-robin \
  --variants "adaptive adaptive_noorder" --probe-reps 0 --latency-reps 0 > $res/b1024.log 2>&1
echo "batch 1024: exit $? ($(( $(date +%s) - t0 )) s)"; sed -n '/^variant /,/^in process/p' $res/b1024.log
grep -E "ISN\(s\) batch" $res/b1024.log
python3 launch/summarize-cluster-cpu.py $res/b1024/runs > $res/cpu.txt 2>&1; cat $res/cpu.txt
pack; ls -la "$OUT"
