#!/usr/bin/env bash
# Session 45, call E (issue 16): the admission ahead ready for the answers' early return (the
# 0.1 quantile of the slowest ISN's compute, not its mean) with the cut at the first ISN's
# answer (adaptive_ahead_cutfirst), one ISN and four at batch 1,024 (CPU engine, 1M documents,
# 240,000 queries, and-or, round-robin shards, 9 interleaved reps). With one ISN the cut rule
# changes nothing.
set -u
source launch/device-env.sh .gpuhost/s45e/bin
t0=$(date +%s)
res=/tmp/s45e; mkdir -p $res
new=$(cd .gpuhost/s45e && pwd)
pack() { cp "$0" $res/; (cd /tmp && find s45e -type f \( -name '*.json' -o -name '*.json.gz' -o -name '*.log' -o -name '*.txt' -o -name '*.sh' \) \
  -size -20M -not -path '*/index*' -print0 | tar --null -T - -czf "$OUT/s45e.tar.gz"); }
nproc > $res/nproc.txt
timeout 340 launch/bench-cluster-overhead.sh --out $res/b1024 --build $new --engine cpu \
  --docs 1000000 --queries 240000 --batches 1024 --isns "1 4" --reps 9 --split round-robin \
  --variants "adaptive_ahead_cutfirst" --probe-reps 0 --latency-reps 0 > $res/b1024.log 2>&1
echo "batch 1024: exit $? ($(( $(date +%s) - t0 )) s)"; sed -n '/^variant /,/^in process/p' $res/b1024.log
grep -E "ISN\(s\) batch" $res/b1024.log
python3 launch/summarize-cluster-cpu.py $res/b1024/runs > $res/cpu.txt 2>&1; cat $res/cpu.txt
pack; ls -la "$OUT"
