#!/usr/bin/env bash
# Session 42, call A (issue 16): the process boundary's polling. c87cfc3's binaries (the engine
# and cluster code of HEAD 7f7711b). Four ISNs against one at batch 1,024 (CPU engine, 1M
# documents, 240,000 queries, and-or, just in time, round-robin shards, 5 interleaved reps) with
# the MPI threads polling every 20 us while hot (_hot20) and/or the engine and merge threads
# always sleeping for work (_sleephand), against the defaults.
set -u
source launch/device-env.sh .gpuhost/s41d/bin
t0=$(date +%s)
res=/tmp/s42a; mkdir -p $res
new=$(cd .gpuhost/s41d && pwd)
pack() { cp "$0" $res/; (cd /tmp && find s42a -type f \( -name '*.json' -o -name '*.json.gz' -o -name '*.log' -o -name '*.txt' -o -name '*.sh' \) \
  -size -20M -not -path '*/index*' -print0 | tar --null -T - -czf "$OUT/s42a.tar.gz"); }
nproc > $res/nproc.txt
launch/bench-cluster-overhead.sh --out $res/b1024 --build $new --engine cpu \
  --docs 1000000 --queries 240000 --batches 1024 --isns "1 4" --reps 5 --split round-robin \
  --variants "adaptive adaptive_hot20 adaptive_sleephand adaptive_hot20_sleephand" \
  --probe-reps 0 --latency-reps 0 > $res/b1024.log 2>&1
echo "batch 1024: exit $? ($(( $(date +%s) - t0 )) s)"; sed -n '/^variant /,/^in process/p' $res/b1024.log
grep -E "ISN\(s\) batch" $res/b1024.log
python3 launch/summarize-cluster-cpu.py $res/b1024/runs > $res/cpu.txt 2>&1; cat $res/cpu.txt
pack; ls -la "$OUT"
