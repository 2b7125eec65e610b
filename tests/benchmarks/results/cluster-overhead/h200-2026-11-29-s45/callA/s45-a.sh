#!/usr/bin/env bash
# Session 45, call A (issue 16): session 43's prepared experiment. The admission's resolving on
# 4 threads (_admit4) against 1 (adaptive), just in time with predicted-finish, one ISN and four
# at batch 1,024 (CPU engine, 1M documents, 240,000 queries, and-or, round-robin shards, 5
# interleaved reps). Code: da5eb2b.
set -u
source launch/device-env.sh .gpuhost/s45a/bin
t0=$(date +%s)
res=/tmp/s45a; mkdir -p $res
new=$(cd .gpuhost/s45a && pwd)
pack() { cp "$0" $res/; (cd /tmp && find s45a -type f \( -name '*.json' -o -name '*.json.gz' -o -name '*.log' -o -name '*.txt' -o -name '*.sh' \) \
  -size -20M -not -path '*/index*' -print0 | tar --null -T - -czf "$OUT/s45a.tar.gz"); }
nproc > $res/nproc.txt; lscpu > $res/lscpu.txt
timeout 480 launch/bench-cluster-overhead.sh --out $res/b1024 --build $new --engine cpu \
  --docs 1000000 --queries 240000 --batches 1024 --isns "1 4" --reps 5 --split round-robin \
  --variants "adaptive adaptive_admit4" --probe-reps 0 --latency-reps 0 > $res/b1024.log 2>&1
echo "batch 1024: exit $? ($(( $(date +%s) - t0 )) s)"; sed -n '/^variant /,/^in process/p' $res/b1024.log
grep -E "ISN\(s\) batch" $res/b1024.log
python3 launch/summarize-cluster-cpu.py $res/b1024/runs > $res/cpu.txt 2>&1; cat $res/cpu.txt
pack; ls -la "$OUT"
