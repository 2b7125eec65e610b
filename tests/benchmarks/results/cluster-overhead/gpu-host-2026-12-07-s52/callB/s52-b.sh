#!/usr/bin/env bash
# Session 52, call B (issue 16), one GPU host (16 cores), about 5 minutes. Binaries:
# .gpuhost/s52a/bin (gpusearch, gpusearch-aggregator, gpusearch-isn of 16f156c; strip, xz -9e) and
# .gpuhost/s52b/bin (bench_shared_shards with the processes configs, ea8dbac). Carry:
# .gpuhost/s52-b.sh .gpuhost/s52a .gpuhost/s52b .gpuhost/rt-debs (park the big result folders: the
# 64 MiB limit). (The GPU engine at batch 64 ran in call A: 5 reps of the default.)
# 1. CPU engine, batch 1,024, one ISN and four, 2 reps, the defaults (targets 1, 2).
# 2. The in-process twin of four ISNs (bench_shared_shards, batch 1,024, 16 threads, 100,000
#    queries): one engine on the whole shard, four sharing engines at once and in lockstep in one
#    process, and the same in four processes of their own sharing slots through shared memory.
#    Does the process boundary alone lose what four ISNs lose against one (NOTES-cluster.md,
#    session 42: four processes compute 2.3-5.6% slower, four arenas in one process 4-5% faster)?
# 3. CPU engine, batch 64, one ISN, 3 reps, the defaults (targets 1, 3, 4), in the time left.
set -u
source launch/device-env.sh .gpuhost/s52a/bin .gpuhost/s52b/bin
device_results s52b
new=$(cd .gpuhost/s52a && pwd)
t0=$(date +%s)
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv > $res/nvidia-smi.txt 2>&1
nproc >> $res/nvidia-smi.txt; lscpu | grep -E "Model name|^CPU\(s\)|L2|L3" >> $res/nvidia-smi.txt
cat $res/nvidia-smi.txt
timeout 200 launch/bench-cluster-overhead.sh --out $res/b1024 --build $new --engine cpu \
  --docs 1000000 --queries 240000 --batches 1024 --isns "1 4" --reps 2 --split round-robin \
  --variants "adaptive" --probe-reps 0 --latency-reps 0 > $res/b1024.log 2>&1
echo "cpu batch 1024: exit $? ($(( $(date +%s) - t0 )) s)"; sed -n '/^variant /,/^in process/p' $res/b1024.log
python3 launch/cluster-legs.py $res/b1024/runs > $res/b1024/legs.txt 2>&1
python3 launch/summarize-isn-scaling.py $res/b1024/runs 2>&1 | tail -3
device_pack
s4=$res/b1024/index-s4-round-robin
[ -d "$s4" ] || $GPUSEARCH_BIN/gpusearch -q partition --index $res/b1024/index --out $s4 --shards 4 --split round-robin
timeout 120 .gpuhost/s52b/bin/bench_shared_shards --whole $res/b1024/index --sharded $s4 \
  --queries $res/b1024/index/queries.test.tsv --limit 100000 --batch 1024 --threads 16 \
  --configs whole,at-once,lockstep,processes,processes-lockstep --reps 2 --out $res/twin.json > $res/twin.log 2>&1
echo "twin: exit $? ($(( $(date +%s) - t0 )) s)"; cat $res/twin.log
device_pack
timeout $(( 500 - ($(date +%s) - t0) )) launch/bench-cluster-overhead.sh --out $res/cpu64 --build $new --engine cpu \
  --index $res/b1024/index --queries 160000 --batches 64 --isns "1" --reps 3 --split round-robin \
  --variants "adaptive" --probe-reps 0 --latency-reps 0 > $res/cpu64.log 2>&1
echo "cpu batch 64: exit $? ($(( $(date +%s) - t0 )) s)"; sed -n '/^variant /,/^in process/p' $res/cpu64.log
python3 launch/cluster-legs.py $res/cpu64/runs > $res/cpu64/legs.txt 2>&1; cat $res/cpu64/legs.txt
device_pack; ls -la "$OUT"
