#!/usr/bin/env bash
# Session 46, call B (issue 16). Call A found the host's Open MPI without its single-copy
# transport (btl_vader_single_copy_mechanism none, set by the image's environment) and a 256 KiB
# message waiting 5.1 ms for a sender that slept 5 ms: an answer above the 4 KiB eager limit
# moves only while its ISN's MPI thread polls. The programs now raise the shared-memory eager
# limit to 1 MiB (--shm-eager-bytes, default 1048576; _eager0 = Open MPI's own 4 KiB, as before).
# 1. bench_mpi_sender_progress with and without it; /dev/shm's size.
# 2. Batch 1,024, one ISN and four (CPU engine, 1M documents, 240,000 queries, and-or,
#    round-robin shards, 3 interleaved reps): adaptive_ahead_cutfirst (session 45's best flags)
#    with and without the eager limit, and the default flags (adaptive).
# 3. Batch 64 (p50 over compute), 2 reps: adaptive, adaptive_eager0, adaptive_ahead.
set -u
source launch/device-env.sh .gpuhost/s46b/bin
t0=$(date +%s)
res=/tmp/s46b; mkdir -p $res
new=$(cd .gpuhost/s46b && pwd)
pack() { cp "$0" $res/; (cd /tmp && find s46b -type f \( -name '*.json' -o -name '*.json.gz' -o -name '*.log' -o -name '*.txt' -o -name '*.sh' \) \
  -size -20M -not -path '*/index*' -print0 | tar --null -T - -czf "$OUT/s46b.tar.gz"); }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
{ df -h /dev/shm; env | grep OMPI_MCA; } > $res/host-facts.txt 2>&1
for e in 1048576 0; do
  timeout 30 mpirun --oversubscribe -np 2 $GPUSEARCH_BIN/bench_mpi_sender_progress --reps 3 --shm-eager-bytes $e > $res/sender-progress-eager$e.txt 2>&1
  timeout 30 mpirun --oversubscribe -np 2 $GPUSEARCH_BIN/bench_mpi_sender_progress --reps 3 --bytes 400000 --shm-eager-bytes $e > $res/sender-progress-400k-eager$e.txt 2>&1
done
cat $res/host-facts.txt; tail -qn1 $res/sender-progress-*.txt
timeout 400 launch/bench-cluster-overhead.sh --out $res/b1024 --build $new --engine cpu \
  --docs 1000000 --queries 240000 --batches 1024 --isns "1 4" --reps 3 --split round-robin \
  --variants "adaptive_ahead_cutfirst adaptive_ahead_cutfirst_eager0 adaptive" \
  --probe-reps 0 --latency-reps 0 > $res/b1024.log 2>&1
echo "batch 1024: exit $? ($(( $(date +%s) - t0 )) s)"; sed -n '/^variant /,/^in process/p' $res/b1024.log
grep -E "ISN\(s\) batch" $res/b1024.log
python3 launch/summarize-cycle.py $res/b1024/runs > $res/cycle.txt 2>&1; cat $res/cycle.txt
pack
timeout $(( 560 - ($(date +%s) - t0) )) launch/bench-cluster-overhead.sh --out $res/b64 --build $new --engine cpu \
  --index $res/b1024/index --queries 30000 --batches 64 --isns "1 4" --reps 2 --split round-robin \
  --variants "adaptive adaptive_eager0 adaptive_ahead" --probe-reps 0 --latency-reps 0 > $res/b64.log 2>&1
echo "batch 64: exit $? ($(( $(date +%s) - t0 )) s)"; sed -n '/^variant /,/^in process/p' $res/b64.log
python3 launch/summarize-cycle.py $res/b64/runs > $res/cycle64.txt 2>&1; cat $res/cycle64.txt
pack; ls -la "$OUT"
