#!/usr/bin/env bash
# Session 47, call E on nvidia-h200-x2 (issue 15): the query split (--gpu-split queries) against
# the docID ranges on the synthetic 2.5M index, with longer runs than session 45's (200,000
# queries, not 50,000 on 1M documents): one ISN over 1 and 2 GPUs at batch 1,024 and 4,096,
# vertical (1 ISN x 2 GPUs) against horizontal (2 ISNs x 1 GPU) in the node, and weak scaling
# (2 GPUs on 5M documents against 1 GPU on 2.5M), k 10, closed loop; every row compared with the
# CPU engine's run. Binaries: this session's (.gpuhost/s47b/bin; gpu/ unchanged since session 45's
# multi-GPU tests passed on this kind). Carry: .gpuhost/s47-e.sh .gpuhost/s47b .gpuhost/rt-debs.
set -u
source launch/device-env.sh .gpuhost/s47b/bin
t0=$(date +%s)
res=/tmp/s47e; mkdir -p $res
pack() { cp "$0" $res/; (cd /tmp && find s47e -type f \( -name '*.json' -o -name '*.md' -o -name '*.log' -o -name '*.txt' -o -name '*.sh' \) \
  -size -20M -not -path '*/indexes/*' -print0 | tar --null -T - -czf "$OUT/s47e.tar.gz"); }
{ nproc; nvidia-smi -L; } > $res/machine.txt 2>&1
timeout $(( ${LIMIT:-420} - ($(date +%s) - t0) )) launch/multi-gpu-runs.sh --out $res/mg --index-root $res/indexes --gpus "1 2" \
  --phases "per-isn per-node weak" --docs 2500000 --queries 200000 --batches "1024 4096" --ks 10 \
  --splits "ranges queries" > $res/mg.log 2>&1
echo "multi-gpu-runs: exit $? ($(( $(date +%s) - t0 )) s)"; grep -E "^\[|q/s" $res/mg.log | cut -c1-200
timeout 30 launch/multi-gpu-runs.sh --out $res/mg --gpus "1 2" --splits "ranges queries" --summarize-only > $res/mg-summary.log 2>&1; tail -30 $res/mg-summary.log
pack; ls -la "$OUT"
