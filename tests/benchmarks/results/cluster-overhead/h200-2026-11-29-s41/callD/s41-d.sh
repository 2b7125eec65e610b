#!/usr/bin/env bash
# Session 41, call D (issue 16): the final code (c87cfc3's binaries). Four ISNs against one at
# batch 1,024 (CPU engine, 1M documents, 240,000 queries, and-or, just in time, round-robin
# shards, 6 interleaved reps); the batch-64 targets (60,000 queries, 3 reps, the fabric probe);
# every GPU test.
set -u
source launch/device-env.sh .gpuhost/s41d/bin
t0=$(date +%s)
res=/tmp/s41d; mkdir -p $res
new=$(cd .gpuhost/s41d && pwd)
pack() { cp "$0" $res/; (cd /tmp && find s41d -type f \( -name '*.json' -o -name '*.log' -o -name '*.txt' -o -name '*.sh' \) \
  -size -20M -not -path '*/index*' -print0 | tar --null -T - -czf "$OUT/s41d.tar.gz"); }
launch/bench-cluster-overhead.sh --out $res/b1024 --build $new --engine cpu \
  --docs 1000000 --queries 240000 --batches 1024 --isns "1 4" --reps 6 --split round-robin \
  --variants "adaptive" --probe-reps 0 --latency-reps 0 > $res/b1024.log 2>&1
echo "batch 1024: exit $? ($(( $(date +%s) - t0 )) s)"; sed -n '/^variant /,/^in process/p' $res/b1024.log
grep -E "ISN\(s\) batch" $res/b1024.log; pack
launch/bench-cluster-overhead.sh --out $res/b64 --build $new --engine cpu \
  --index $res/b1024/index --queries 60000 --batches 64 --isns "1 4" --reps 3 --split round-robin \
  --variants "adaptive" --probe-reps 2 --latency-reps 0 > $res/b64.log 2>&1
echo "batch 64: exit $? ($(( $(date +%s) - t0 )) s)"; sed -n '/^variant /,$p' $res/b64.log | head -30
grep -E "ISN\(s\) batch" $res/b64.log; pack
timeout 200 $new/bin/gpu_tests > $res/gpu_tests.log 2>&1
echo "gpu_tests: exit $? ($(( $(date +%s) - t0 )) s)"; grep -E "^\[  (PASSED|FAILED|SKIPPED)|tests ran" $res/gpu_tests.log | head -12
pack; ls -la "$OUT"
