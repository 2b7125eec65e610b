#!/usr/bin/env bash
# Session 31, call B. Issue 10: qtf drift comparison again (helpers off for whole-list replay),
# with a third arm that runs the online machinery but never changes the cache (min payoff 1e12):
# what the policy's presence costs. Issue 11: the finer rate search (LD_LIBRARY_PATH fixed).
set -u
export NCCL_NVLS_ENABLE=0 GPUSEARCH_BIN=.gpuhost/s31a/bin
export LD_LIBRARY_PATH=/opt/deps/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
DRIFT_POLICY=qtf DRIFT_ROUNDS=5 \
  DRIFT_ONLINE="idle:1:0.02:gaps:gaps,idle:0:0:gaps:gaps,idle:1e12:1e9:gaps:gaps" \
  timeout 300 launch/gpu-host.sh cache-drift
echo "cache-drift exit $?"
idx=/tmp/gpusearch-bench-syn2500000
if [[ -f $idx/manifest.json ]]; then
  timeout 260 .gpuhost/s31a/bin/bench_scheduler --index $idx --out "$OUT/sched_fine_synthetic.json" \
    --seconds-per-rate 2 --rate-step 1.1 --max-runs 18 --configs "cpu,gpu,queues-lone-cost,queues" \
    > "$OUT/sched_fine_synthetic.log" 2>&1
  echo "sched exit $?"
  grep -E '^(index|predictor|[a-z-]+ +sustained|queues)' "$OUT/sched_fine_synthetic.log"
fi
launch/gpu-host.sh pack > /dev/null 2>&1
ls -la "$OUT"
