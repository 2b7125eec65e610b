#!/usr/bin/env bash
# Session 46, call A (issue 16), prepared in session 45: why four ISNs' answers take ~1 ms from
# encoded to received (one ISN's 0.13 ms). First the host's MPI facts: vader's single-copy
# mechanism and whether a large message reaches its receiver while the sender makes no
# progress (bench_mpi_sender_progress). Then batch 1,024 (CPU engine, 1M documents, 240,000
# queries, and-or, round-robin shards, 3 interleaved reps), one ISN and four:
# adaptive_ahead_cutfirst (session 45's best), with --busy-poll sending, with --busy-poll hot,
# and with a lead of 0.2.
# launch/summarize-cycle.py reads the legs, with the ISNs' answer_post_us / answer_send_us.
# Code: 4f6008f (the ISN's answer packed on its engine threads, session 45, is in every variant).
set -u
source launch/device-env.sh .gpuhost/s46a/bin
t0=$(date +%s)
res=/tmp/s46a; mkdir -p $res
new=$(cd .gpuhost/s46a && pwd)
pack() { cp "$0" $res/; (cd /tmp && find s46a -type f \( -name '*.json' -o -name '*.json.gz' -o -name '*.log' -o -name '*.txt' -o -name '*.sh' \) \
  -size -20M -not -path '*/index*' -print0 | tar --null -T - -czf "$OUT/s46a.tar.gz"); }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
{ nproc; cat /proc/sys/kernel/yama/ptrace_scope 2>&1; grep Cap /proc/self/status; ompi_info --version | head -1;
  ompi_info --param btl vader --level 9 | grep -E "single_copy_mechanism|eager_limit|max_send_size"; } > $res/mpi-facts.txt 2>&1
timeout 30 mpirun --oversubscribe -np 2 $GPUSEARCH_BIN/bench_mpi_sender_progress > $res/sender-progress.txt 2>&1
timeout 30 mpirun --oversubscribe -np 2 --mca btl_vader_single_copy_mechanism none $GPUSEARCH_BIN/bench_mpi_sender_progress --reps 3 > $res/sender-progress-nocma.txt 2>&1
cat $res/mpi-facts.txt; tail -1 $res/sender-progress.txt; tail -1 $res/sender-progress-nocma.txt
timeout 440 launch/bench-cluster-overhead.sh --out $res/b1024 --build $new --engine cpu \
  --docs 1000000 --queries 240000 --batches 1024 --isns "1 4" --reps 3 --split round-robin \
  --variants "adaptive_ahead_cutfirst adaptive_ahead_cutfirst_busysend adaptive_ahead_cutfirst_busyhot adaptive_ahead_cutfirst_lead2" \
  --probe-reps 0 --latency-reps 0 > $res/b1024.log 2>&1
echo "batch 1024: exit $? ($(( $(date +%s) - t0 )) s)"; sed -n '/^variant /,/^in process/p' $res/b1024.log
grep -E "ISN\(s\) batch" $res/b1024.log
python3 launch/summarize-cycle.py $res/b1024/runs > $res/cycle.txt 2>&1; cat $res/cycle.txt
python3 launch/summarize-cluster-cpu.py $res/b1024/runs > $res/cpu.txt 2>&1; cat $res/cpu.txt
pack; ls -la "$OUT"
