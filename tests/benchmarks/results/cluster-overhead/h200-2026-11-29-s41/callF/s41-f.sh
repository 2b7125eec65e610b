#!/usr/bin/env bash
# Session 41, call F (issue 16): the final code (call E's binaries), four ISNs against one at batch
# 1,024, more reps: CPU engine, 1M documents, 120,000 queries a run, and-or, just in time,
# round-robin shards, 10 interleaved reps.
set -u
source launch/device-env.sh .gpuhost/s41e/bin
t0=$(date +%s)
res=/tmp/s41f; mkdir -p $res
new=$(cd .gpuhost/s41e && pwd)
pack() { cp "$0" $res/; (cd /tmp && find s41f -type f \( -name '*.json' -o -name '*.log' -o -name '*.txt' -o -name '*.sh' \) \
  -size -20M -not -path '*/index*' -print0 | tar --null -T - -czf "$OUT/s41f.tar.gz"); }
( while sleep 20; do pack; done ) & packer=$!
launch/bench-cluster-overhead.sh --out $res/b1024 --build $new --engine cpu \
  --docs 1000000 --queries 120000 --batches 1024 --isns "1 4" --reps 10 --split round-robin \
  --variants "adaptive" --probe-reps 0 --latency-reps 0 > $res/b1024.log 2>&1
echo "batch 1024: exit $? ($(( $(date +%s) - t0 )) s)"; kill $packer
sed -n '/^variant /,/^in process/p' $res/b1024.log; grep -E "ISN\(s\) batch" $res/b1024.log
pack; ls -la "$OUT"
