#!/usr/bin/env bash
# Session 46, call C (issue 16). Call B: the 1 MiB shared-memory eager limit made a 400 KiB
# message independent of its sender's progress (0.14 ms against 5.1 ms), yet four ISNs' answers
# still took 1.2-1.4 ms from encoded to the aggregator's receive loop, and the ISNs' sends ~0.8 ms
# to complete: the aggregator consumes late. Why: its main thread's run delay (runnable without
# a core), its late yields and its own long rounds, now in the metrics (summarize-cycle.py's
# a-delay, a-yield, a-round, i-delay). And a candidate: the aggregator alone polling without a
# yield while hot (_aggbusy: --busy-poll hot --isn-busy-poll off).
# Batch 1,024, one ISN and four (CPU engine, 1M documents, 240,000 queries, and-or,
# round-robin shards, 3 interleaved reps); then batch 64 (p50 over compute), 2 reps.
set -u
source launch/device-env.sh .gpuhost/s46c/bin
t0=$(date +%s)
res=/tmp/s46c; mkdir -p $res
new=$(cd .gpuhost/s46c && pwd)
pack() { cp "$0" $res/; (cd /tmp && find s46c -type f \( -name '*.json' -o -name '*.json.gz' -o -name '*.log' -o -name '*.txt' -o -name '*.sh' \) \
  -size -20M -not -path '*/index*' -print0 | tar --null -T - -czf "$OUT/s46c.tar.gz"); }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
timeout 420 launch/bench-cluster-overhead.sh --out $res/b1024 --build $new --engine cpu \
  --docs 1000000 --queries 240000 --batches 1024 --isns "1 4" --reps 3 --split round-robin \
  --variants "adaptive adaptive_aggbusy adaptive_ahead_cutfirst adaptive_ahead_cutfirst_aggbusy" \
  --probe-reps 0 --latency-reps 0 > $res/b1024.log 2>&1
echo "batch 1024: exit $? ($(( $(date +%s) - t0 )) s)"; sed -n '/^variant /,/^in process/p' $res/b1024.log
grep -E "ISN\(s\) batch" $res/b1024.log
python3 launch/summarize-cycle.py $res/b1024/runs > $res/cycle.txt 2>&1; cat $res/cycle.txt
pack
timeout $(( 565 - ($(date +%s) - t0) )) launch/bench-cluster-overhead.sh --out $res/b64 --build $new --engine cpu \
  --index $res/b1024/index --queries 30000 --batches 64 --isns "1 4" --reps 2 --split round-robin \
  --variants "adaptive adaptive_aggbusy" --probe-reps 0 --latency-reps 0 > $res/b64.log 2>&1
echo "batch 64: exit $? ($(( $(date +%s) - t0 )) s)"; sed -n '/^variant /,/^in process/p' $res/b64.log
python3 launch/summarize-cycle.py $res/b64/runs > $res/cycle64.txt 2>&1; cat $res/cycle64.txt
pack; ls -la "$OUT"
