#!/usr/bin/env bash
# Session 45, call C (issue 16): the admission ahead (_ahead: --admission-ahead on) with the cut
# at the first ISN's answer (_cutfirst) against predicted-finish, one ISN and four at batch
# 1,024 (CPU engine, 1M documents, 240,000 queries, and-or, round-robin shards, 5 interleaved
# reps). With one ISN the two cuts are the same. Code: this session's default-off admission
# ahead (--admission-ahead off unless the variant says _ahead).
set -u
source launch/device-env.sh .gpuhost/s45c/bin
t0=$(date +%s)
res=/tmp/s45c; mkdir -p $res
new=$(cd .gpuhost/s45c && pwd)
pack() { cp "$0" $res/; (cd /tmp && find s45c -type f \( -name '*.json' -o -name '*.json.gz' -o -name '*.log' -o -name '*.txt' -o -name '*.sh' \) \
  -size -20M -not -path '*/index*' -print0 | tar --null -T - -czf "$OUT/s45c.tar.gz"); }
nproc > $res/nproc.txt
timeout 440 launch/bench-cluster-overhead.sh --out $res/b1024 --build $new --engine cpu \
  --docs 1000000 --queries 240000 --batches 1024 --isns "1 4" --reps 5 --split round-robin \
  --variants "adaptive_ahead adaptive_ahead_cutfirst" --probe-reps 0 --latency-reps 0 > $res/b1024.log 2>&1
echo "batch 1024: exit $? ($(( $(date +%s) - t0 )) s)"; sed -n '/^variant /,/^in process/p' $res/b1024.log
grep -E "ISN\(s\) batch" $res/b1024.log
python3 launch/summarize-cluster-cpu.py $res/b1024/runs > $res/cpu.txt 2>&1; cat $res/cpu.txt
pack; ls -la "$OUT"
