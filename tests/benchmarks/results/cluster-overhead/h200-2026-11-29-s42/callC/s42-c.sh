#!/usr/bin/env bash
# Session 42, call C (issue 16): sharing shards publish their first documents one by one
# (--share-defer-first off) against together once the heap holds k while the union is unset
# (session 41's default), with and without the batch's queries in batch order. The in-process
# twin (bench_shared_shards, 16 threads, whole and at once, 2 reps), then the cluster: four ISNs
# against one at batch 1,024 (CPU engine, 1M documents, 240,000 queries, and-or, just in time,
# round-robin shards, 4 interleaved reps), the default against _nodefer.
set -u
source launch/device-env.sh .gpuhost/s42c/bin
t0=$(date +%s)
res=/tmp/s42c; mkdir -p $res
new=$(cd .gpuhost/s42c && pwd)
pack() { cp "$0" $res/; (cd /tmp && find s42c -type f \( -name '*.json' -o -name '*.log' -o -name '*.txt' -o -name '*.sh' \) \
  -size -20M -not -path '*/index*' -print0 | tar --null -T - -czf "$OUT/s42c.tar.gz"); }
idx=$res/b1024/index; mkdir -p $res/b1024
$new/bin/gpusearch -q index --synthetic "docs=1000000,seed=7,test_queries=240000" --out $idx > $res/index.log 2>&1
$new/bin/gpusearch -q partition --index $idx --out $res/b1024/index-s4-round-robin --shards 4 --split round-robin --force >> $res/index.log 2>&1
echo "index: $(( $(date +%s) - t0 )) s"
for rep in 1 2; do for d in on off; do for o in off on; do
  $new/bin/bench_shared_shards --whole $idx --sharded $res/b1024/index-s4-round-robin \
    --queries $idx/queries.test.tsv --limit 100000 --threads 16 --configs whole,at-once \
    --defer-first $d --in-order $o --out $res/twin-d$d-o$o-$rep.json 2>&1 | grep rep | sed "s/^/defer $d order $o: /" | tee -a $res/twin.log
done; done; done
echo "twin: $(( $(date +%s) - t0 )) s"; pack
launch/bench-cluster-overhead.sh --out $res/b1024 --build $new --engine cpu \
  --index $idx --queries 240000 --batches 1024 --isns "1 4" --reps 4 --split round-robin \
  --variants "adaptive adaptive_nodefer" --probe-reps 0 --latency-reps 0 > $res/b1024.log 2>&1
echo "batch 1024: exit $? ($(( $(date +%s) - t0 )) s)"; sed -n '/^variant /,/^in process/p' $res/b1024.log
grep -E "ISN\(s\) batch" $res/b1024.log
python3 launch/summarize-cluster-cpu.py $res/b1024/runs > $res/cpu.txt 2>&1; cat $res/cpu.txt
pack; ls -la "$OUT"
