#!/usr/bin/env bash
# Session 47, call A (issue 16), prepared in session 46: the MPI threads weighted above the
# engines' threads (--mpi-thread-nice -10, bench variant _nice10) against the default, one ISN
# and four at batch 1,024 (CPU engine, 1M documents, 240,000 queries, and-or, round-robin shards,
# 7 interleaved reps). Session 46 measured the aggregator's main thread runnable without a core
# for 5-6 ms of every batch (a-delay) and four ISNs at 4/1 1.012 by the paired median, 0.971 by
# the geometric mean (call D). Code: bcd3907 (binaries in .gpuhost/s47a/bin).
# Carry: .gpuhost/s47-a.sh .gpuhost/s47a .gpuhost/rt-debs. If the tool refuses the size, move
# tests/benchmarks/results/cluster-overhead/h200-2026-11-29-s4[56] out of the tree for the call.
set -u
source launch/device-env.sh .gpuhost/s47a/bin
t0=$(date +%s)
res=/tmp/s47a; mkdir -p $res
new=$(cd .gpuhost/s47a && pwd)
pack() { cp "$0" $res/; (cd /tmp && find s47a -type f \( -name '*.json' -o -name '*.json.gz' -o -name '*.log' -o -name '*.txt' -o -name '*.sh' \) \
  -size -20M -not -path '*/index*' -print0 | tar --null -T - -czf "$OUT/s47a.tar.gz"); }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
grep -E "Cap(Eff|Prm)" /proc/self/status > $res/caps.txt; uname -r >> $res/caps.txt
timeout 430 launch/bench-cluster-overhead.sh --out $res/b1024 --build $new --engine cpu \
  --docs 1000000 --queries 240000 --batches 1024 --isns "1 4" --reps 7 --split round-robin \
  --variants "adaptive adaptive_nice10" --probe-reps 0 --latency-reps 0 > $res/b1024.log 2>&1
echo "batch 1024: exit $? ($(( $(date +%s) - t0 )) s)"; sed -n '/^variant /,/^in process/p' $res/b1024.log
python3 launch/summarize-isn-scaling.py $res/b1024/runs | tee $res/scaling.txt
python3 launch/summarize-cycle.py $res/b1024/runs > $res/cycle.txt 2>&1; cat $res/cycle.txt
python3 -c 'import json,sys; m=json.load(open(sys.argv[1])); print("nice:", m["progress"]["thread_nice"], repr(m["progress"]["thread_nice_error"]), [(i["stats"]["progress"]["thread_nice"], i["stats"]["progress"]["thread_nice_error"]) for i in m["isn"]])' $res/b1024/runs/adaptive_nice10-isns4-batch1024-rep1.json
pack; ls -la "$OUT"
