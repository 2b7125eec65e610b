#!/usr/bin/env bash
# Session 39, call E (issue 10), main b605987: plans fill the spare budget (call D: 2.5x VFB
# 0.77/0.82 of all-resident with it, 0.70 without) and the list batches reuse the last call's
# memory (new here). The GPU tests; the full sweep (vfb 0.75/1, qtf, qtfdf; S_c/M 0.6/0.8/0.9;
# the model at 10x) twice; then the drifting log at 1/10 with the ISN's online defaults.
set -u
export NCCL_NVLS_ENABLE=0
export GPUSEARCH_DEBS=.gpuhost/rt-debs
export LD_LIBRARY_PATH=/opt/deps/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export GPUSEARCH_BIN=.gpuhost/s39e/bin
launch/gpu-host.sh deps > /dev/null 2>&1 || true
res=/tmp/s39e; mkdir -p $res
t0=$(date +%s)
bin=.gpuhost/s39e/bin
[[ -f $bin/gpusearch.gz ]] && gunzip -f $bin/*.gz; chmod +x $bin/*
idx=/tmp/gpusearch-bench-syn2500000
$bin/gpusearch -q index --synthetic docs=2500000,seed=7 --out $idx --force > $res/index_build.log 2>&1
echo "index: exit $? ($(( $(date +%s) - t0 )) s)"
for round in 1 2; do
  timeout 150 $bin/bench_list_cache --index $idx --out $res/cache_bench_$round.json \
    --model-out $res/cache_model_$round.json --policies vfb:0.75,vfb:1,qtf,qtfdf --shares 0.6,0.8,0.9 \
    --caps 4096,512 --model-ratio 10 --model-shares 0.1,0.3 > $res/cache_bench_$round.log 2>&1
  echo "sweep round $round: exit $? ($(( $(date +%s) - t0 )) s)"
  grep -E "^(baselines|[0-9.]+x:|model \(|wrong)" $res/cache_bench_$round.log | cut -c1-230
  tar -C /tmp -czf "$OUT/s39e.tar.gz" s39e
done
python3 - $res <<'PY' || true
import json, sys, glob
for f in sorted(glob.glob(sys.argv[1] + "/cache_bench_*.json")):
    j = json.load(open(f)); a = j["gpu_all_resident"]
    print(f.split("/")[-1], "all-resident: call %.2f ms, plan %.2f ms" % (a["call_ms_p50"], 1e3 * a["call_plan_seconds"]))
    for r in j["sweep"]:
        if r["policy"] == "vfb:1" and r["batch_cap"] == 4096:
            print("  %sx vfb:1 %.1f: %.0f q/s, call %.2f ms, plan %.2f ms (list batches %.2f), h2d %.1f ms" % (r["ratio"], r["cache_share"], r["queries_per_second"], r["call_ms_p50"], 1e3 * r["call_plan_seconds"], 1e3 * r.get("call_list_batches_seconds", 0), 1e3 * r["h2d_seconds"]))
PY
timeout 200 $bin/gpu_tests > $res/gpu_tests.log 2>&1
echo "gpu_tests: exit $? ($(( $(date +%s) - t0 )) s)"; grep -E '^\[  (PASSED|FAILED)' $res/gpu_tests.log | head
tar -C /tmp -czf "$OUT/s39e.tar.gz" s39e
left=$(( 580 - ($(date +%s) - t0) ))
if (( left > 60 )); then
  OUT=$res/drift-ratio10 DRIFT_POLICY=vfb:1 DRIFT_ROUNDS=4 DRIFT_REPLAN=2000 \
    DRIFT_ONLINE="idle:1:0.02:gaps:gaps:8:4" CACHE_ARGS="--drift-ratio 10" \
    timeout $left launch/gpu-host.sh cache-drift > $res/drift-ratio10.log 2>&1
  echo "drift: exit $? ($(( $(date +%s) - t0 )) s)"
  grep -E '/ offline' $res/drift-ratio10/cache_drift.log
fi
cp "$0" $res/; cp $OUT/nvidia-smi.txt $res/ 2>/dev/null
tar -C /tmp -czf "$OUT/s39e.tar.gz" s39e
