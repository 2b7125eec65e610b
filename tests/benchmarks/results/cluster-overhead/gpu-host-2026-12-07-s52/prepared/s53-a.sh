#!/usr/bin/env bash
# Prepared in session 52 for the next device call (issue 16, target 2), one GPU host (16 cores),
# about 3 minutes: session 52 call B's twin again, telling the process boundary's cost apart.
# `at-once-shm` and `lockstep-shm` are one process with the slots in a shared memfd, as the
# processes configs have them: if they lose what `processes` loses against `at-once`, the slots'
# pages are the cost (the ISNs' MPI shared window could then ask for huge pages); if not, the
# processes themselves (page tables, oneTBB pools, allocators). Every shard's mapped arrays are
# touched before any timed part, and each config's minor faults in its timed part are counted.
# Binaries (strip, xz -9e): .gpuhost/s53a/bin/gpusearch (index, partition) and
# bench_shared_shards of main. Carry: .gpuhost/s53-a.sh .gpuhost/s53a .gpuhost/rt-debs.
set -u
source launch/device-env.sh .gpuhost/s53a/bin
device_results s53a
t0=$(date +%s)
nproc > $res/nvidia-smi.txt; nvidia-smi --query-gpu=name --format=csv,noheader >> $res/nvidia-smi.txt 2>&1
cat /sys/kernel/mm/transparent_hugepage/enabled /sys/kernel/mm/transparent_hugepage/shmem_enabled >> $res/nvidia-smi.txt 2>&1
cat $res/nvidia-smi.txt
gs=.gpuhost/s53a/bin/gpusearch
$gs -q index --synthetic "docs=1000000,seed=7,test_queries=100000" --out $res/index > $res/index.log 2>&1
$gs -q partition --index $res/index --out $res/s4 --shards 4 --split round-robin >> $res/index.log 2>&1
echo "index and shards: ($(( $(date +%s) - t0 )) s)"
timeout $(( 280 - ($(date +%s) - t0) )) .gpuhost/s53a/bin/bench_shared_shards --whole $res/index --sharded $res/s4 \
  --queries $res/index/queries.test.tsv --limit 100000 --batch 1024 --threads 16 \
  --configs whole,at-once,at-once-shm,processes,lockstep,lockstep-shm,processes-lockstep --reps 3 --out $res/twin.json > $res/twin.log 2>&1
echo "twin: exit $? ($(( $(date +%s) - t0 )) s)"; cat $res/twin.log
device_pack; ls -la "$OUT"
