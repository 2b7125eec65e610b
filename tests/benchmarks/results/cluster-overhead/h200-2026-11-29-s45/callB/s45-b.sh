#!/usr/bin/env bash
# Session 45, call B (issue 16): the admission ahead (--admission-ahead on, the new default:
# a batch's queries admitted to be ready when it is expected to leave by the mean compute)
# against the admission for the aim's cut (_noahead, the code before), one ISN and four at
# batch 1,024 (CPU engine, 1M documents, 240,000 queries, and-or, round-robin shards, 4
# interleaved reps; and the admission ahead on 4 threads, _admit4); then batch 64 (p50 over
# compute), 2 reps.
set -u
source launch/device-env.sh .gpuhost/s45b/bin
t0=$(date +%s)
res=/tmp/s45b; mkdir -p $res
new=$(cd .gpuhost/s45b && pwd)
pack() { cp "$0" $res/; (cd /tmp && find s45b -type f \( -name '*.json' -o -name '*.json.gz' -o -name '*.log' -o -name '*.txt' -o -name '*.sh' \) \
  -size -20M -not -path '*/index*' -print0 | tar --null -T - -czf "$OUT/s45b.tar.gz"); }
nproc > $res/nproc.txt; lscpu > $res/lscpu.txt
timeout 380 launch/bench-cluster-overhead.sh --out $res/b1024 --build $new --engine cpu \
  --docs 1000000 --queries 240000 --batches 1024 --isns "1 4" --reps 4 --split round-robin \
  --variants "adaptive adaptive_noahead adaptive_admit4" --probe-reps 0 --latency-reps 0 > $res/b1024.log 2>&1
echo "batch 1024: exit $? ($(( $(date +%s) - t0 )) s)"; sed -n '/^variant /,/^in process/p' $res/b1024.log
grep -E "ISN\(s\) batch" $res/b1024.log
python3 launch/summarize-cluster-cpu.py $res/b1024/runs > $res/cpu.txt 2>&1; cat $res/cpu.txt
pack
timeout $(( 530 - ($(date +%s) - t0) )) launch/bench-cluster-overhead.sh --out $res/b64 --build $new --engine cpu \
  --index $res/b1024/index --queries 30000 --batches 64 --isns "1 4" --reps 2 --split round-robin \
  --variants "adaptive adaptive_noahead" --probe-reps 0 --latency-reps 0 > $res/b64.log 2>&1
echo "batch 64: exit $? ($(( $(date +%s) - t0 )) s)"; sed -n '/^variant /,$p' $res/b64.log | head -30
pack; ls -la "$OUT"
