#!/usr/bin/env bash
# Session 31, call C. Issue 10: where the online arm's longer calls go (qtf, 3 arms, 3 rounds;
# per-call split before / launches / after, observe time). Issue 11: rate search climbing by
# 1.5 and bisecting to 3% (2 s per rate).
set -u
export NCCL_NVLS_ENABLE=0 GPUSEARCH_BIN=.gpuhost/s31c/bin
export LD_LIBRARY_PATH=/opt/deps/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
DRIFT_POLICY=qtf DRIFT_ROUNDS=3 \
  DRIFT_ONLINE="idle:1:0.02:gaps:gaps,idle:0:0:gaps:gaps,idle:1e12:1e9:gaps:gaps" \
  timeout 200 launch/gpu-host.sh cache-drift
echo "cache-drift exit $?"
idx=/tmp/gpusearch-bench-syn2500000
if [[ -f $idx/manifest.json ]]; then
  timeout 280 .gpuhost/s31c/bin/bench_scheduler --index $idx --out "$OUT/sched_fine_synthetic.json" \
    --seconds-per-rate 2 --rate-step 1.5 --bisect-to 1.03 --max-runs 18 \
    --configs "cpu,gpu,queues-lone-cost,queues" > "$OUT/sched_fine_synthetic.log" 2>&1
  echo "sched exit $?"
  grep -E '^(index|predictor|[a-z-]+ +sustained|queues)' "$OUT/sched_fine_synthetic.log"
fi
launch/gpu-host.sh pack > /dev/null 2>&1
ls -la "$OUT"
