#!/usr/bin/env bash
# Session 43, call B (issue 16): just in time, once the first ISN has answered the batches
# ahead, the next batch cut to reach the slowest ISN at its predicted (mean) finish (the new
# default, predicted-finish), at the first answer (_cutfirst), or only once every ISN has
# answered (_cutall, the code before). Four ISNs against one at batch 1,024 (CPU engine, 1M documents, 240,000 queries,
# and-or, round-robin shards, 4 interleaved reps); then batch 64 (p50 over compute), 2 reps.
set -u
source launch/device-env.sh .gpuhost/s43b/bin
t0=$(date +%s)
res=/tmp/s43b; mkdir -p $res
new=$(cd .gpuhost/s43b && pwd)
pack() { cp "$0" $res/; (cd /tmp && find s43b -type f \( -name '*.json' -o -name '*.json.gz' -o -name '*.log' -o -name '*.txt' -o -name '*.sh' \) \
  -size -20M -not -path '*/index*' -print0 | tar --null -T - -czf "$OUT/s43b.tar.gz"); }
nproc > $res/nproc.txt
launch/bench-cluster-overhead.sh --out $res/b1024 --build $new --engine cpu \
  --docs 1000000 --queries 240000 --batches 1024 --isns "1 4" --reps 4 --split round-robin \
  --variants "adaptive adaptive_cutfirst adaptive_cutall" --probe-reps 0 --latency-reps 0 > $res/b1024.log 2>&1
echo "batch 1024: exit $? ($(( $(date +%s) - t0 )) s)"; sed -n '/^variant /,/^in process/p' $res/b1024.log
grep -E "ISN\(s\) batch" $res/b1024.log
python3 launch/summarize-cluster-cpu.py $res/b1024/runs > $res/cpu.txt 2>&1; cat $res/cpu.txt
pack
timeout $(( 570 - ($(date +%s) - t0) )) launch/bench-cluster-overhead.sh --out $res/b64 --build $new --engine cpu \
  --index $res/b1024/index --queries 30000 --batches 64 --isns "1 4" --reps 2 --split round-robin \
  --variants "adaptive adaptive_cutfirst adaptive_cutall" --probe-reps 0 --latency-reps 0 > $res/b64.log 2>&1
echo "batch 64: exit $? ($(( $(date +%s) - t0 )) s)"; sed -n '/^variant /,/^in process/p' $res/b64.log
pack; ls -la "$OUT"
