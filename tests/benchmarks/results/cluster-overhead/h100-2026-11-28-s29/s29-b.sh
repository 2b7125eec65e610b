#!/usr/bin/env bash
# Session 29, call 2 (issue 16): just-in-time admission with the batch-features prediction
# against the mean and the window; answers eager over shared memory; CPU then GPU engine.
set -u
export NCCL_NVLS_ENABLE=0
export GPUSEARCH_BIN=.gpuhost/s29/bin OVERHEAD_QUERIES=30000 OVERHEAD_PROBE_REPS=0 OVERHEAD_LATENCY_REPS=0
OVERHEAD_ENGINES=cpu OVERHEAD_REPS=2 \
  OVERHEAD_VARIANTS="adaptive adaptive_mean adaptive_eager spin spin_mean adaptive_window" \
  timeout 330 launch/gpu-host.sh overhead
echo "overhead cpu exit $?"
OVERHEAD_ENGINES=gpu OVERHEAD_REPS=1 OVERHEAD_VARIANTS="adaptive adaptive_eager spin adaptive_window" \
  timeout 200 launch/gpu-host.sh overhead
echo "overhead gpu exit $?"
for e in cpu gpu; do
  python3 - "$OUT/overhead-$e/cluster-overhead.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
for r in d["runs"]:
    if r["variant"] != "inprocess" and r["batch"] == 64:
        cp = r.get("compute_prediction") or {}
        print("pred", r["variant"], r["isns"], r["rep"], "mean %.3f model %.3f" % (cp.get("mean_relative_error", 0), cp.get("model_relative_error", 0)))
PY
done
launch/gpu-host.sh pack > /dev/null
ls -la "$OUT"
