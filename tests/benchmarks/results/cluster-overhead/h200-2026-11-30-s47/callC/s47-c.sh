#!/usr/bin/env bash
# Session 47, call C (issue 16): at batch 1,024, the aggregator's MPI thread alone at nice -10
# (_aggnice10: call A's -10 for every MPI thread took the aggregator's run delay from 6.3 to 4.3 ms
# a batch and an answer's way back from 0.9 to 0.4 ms, but the ISNs' MPI threads preempted their
# engines and 4/1 fell from 0.981 to 0.942) and window admission (_window: batches queue at the
# ISNs, no idle between batches; last measured in session 40, before the eager limit) against
# the default, one ISN and four (CPU engine, 1M documents, 240,000 queries, and-or, round-robin
# shards, 5 interleaved reps). Code: this session's --isn-mpi-thread-nice (binaries in
# .gpuhost/s47b/bin). Carry: .gpuhost/s47-c.sh .gpuhost/s47b .gpuhost/rt-debs; move
# tests/benchmarks/results/cluster-overhead/h200-2026-11-29-s4[56] out of the tree for the call.
set -u
source launch/device-env.sh .gpuhost/s47b/bin
t0=$(date +%s)
res=/tmp/s47c; mkdir -p $res
new=$(cd .gpuhost/s47b && pwd)
pack() { cp "$0" $res/; (cd /tmp && find s47c -type f \( -name '*.json' -o -name '*.json.gz' -o -name '*.log' -o -name '*.txt' -o -name '*.sh' \) \
  -size -20M -not -path '*/index*' -print0 | tar --null -T - -czf "$OUT/s47c.tar.gz"); }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
timeout 500 launch/bench-cluster-overhead.sh --out $res/b1024 --build $new --engine cpu \
  --docs 1000000 --queries 240000 --batches 1024 --isns "1 4" --reps 5 --split round-robin \
  --variants "adaptive adaptive_aggnice10 adaptive_window" --probe-reps 0 --latency-reps 0 > $res/b1024.log 2>&1
echo "batch 1024: exit $? ($(( $(date +%s) - t0 )) s)"; sed -n '/^variant /,/^in process/p' $res/b1024.log
python3 launch/summarize-isn-scaling.py $res/b1024/runs | tee $res/scaling.txt
python3 launch/summarize-cycle.py $res/b1024/runs > $res/cycle.txt 2>&1; cat $res/cycle.txt
python3 -c 'import json,sys; m=json.load(open(sys.argv[1])); print("nice:", m["progress"]["thread_nice"], [i["stats"]["progress"]["thread_nice"] for i in m["isn"]])' $res/b1024/runs/adaptive_aggnice10-isns4-batch1024-rep1.json
pack; ls -la "$OUT"
