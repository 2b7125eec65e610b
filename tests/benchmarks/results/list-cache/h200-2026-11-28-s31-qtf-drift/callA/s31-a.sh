#!/usr/bin/env bash
# Session 31, call A. Issue 10: the drift comparison with whole-list admission (qtf) in both
# arms (the online policy counts frequencies, replays nothing), gated and every plan, 5 rounds;
# the online GPU tests (qtf case new). Issue 11: bench_scheduler on the synthetic 2.5M index
# with a finer rate search (step 1.1, 2 s per rate) for cpu, gpu, queues-lone-cost, queues.
set -u
export NCCL_NVLS_ENABLE=0 GPUSEARCH_BIN=.gpuhost/s31a/bin
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
DRIFT_POLICY=qtf DRIFT_ROUNDS=5 DRIFT_ONLINE="idle:1:0.02:gaps:gaps,idle:0:0:gaps:gaps" \
  timeout 330 launch/gpu-host.sh cache-drift
echo "cache-drift exit $?"
idx=/tmp/gpusearch-bench-syn2500000
if [[ -f $idx/manifest.json ]]; then
  timeout 230 .gpuhost/s31a/bin/bench_scheduler --index $idx --out "$OUT/sched_fine_synthetic.json" \
    --seconds-per-rate 2 --rate-step 1.1 --max-runs 18 --configs "cpu,gpu,queues-lone-cost,queues" \
    > "$OUT/sched_fine_synthetic.log" 2>&1
  echo "sched exit $?"
  grep -E '^(index|predictor|[a-z-]+ +sustained|queues)' "$OUT/sched_fine_synthetic.log"
fi
launch/gpu-host.sh pack > /dev/null 2>&1
ls -la "$OUT"
