#!/usr/bin/env bash
# Session 39, call D (issue 10). Call C (the sweep at 36632a4): at 2.5x VFB ran 0.71 of the
# all-resident engine (H100, 2026-11-24: 0.98); its calls spent ~2 ms more in planning and
# shipped 14 MB a launch, while the training log's lists filled 0.35 of the cache's 0.6 M. Here,
# at the working tree (plans fill the spare budget with unqueried lists, longest first; the
# planning's time in parts): the sweep with the fill and with --no-fill, alternating, 2 rounds;
# then every GPU test. Binaries: .gpuhost/s39d/bin.
set -u
export NCCL_NVLS_ENABLE=0
export GPUSEARCH_DEBS=.gpuhost/rt-debs
export LD_LIBRARY_PATH=/opt/deps/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export GPUSEARCH_BIN=.gpuhost/s39d/bin
launch/gpu-host.sh deps > /dev/null 2>&1 || true
res=/tmp/s39d; mkdir -p $res
t0=$(date +%s)
bin=.gpuhost/s39d/bin
[[ -f $bin/gpusearch.gz ]] && gunzip -f $bin/*.gz; chmod +x $bin/*
idx=/tmp/gpusearch-bench-syn2500000
$bin/gpusearch -q index --synthetic docs=2500000,seed=7 --out $idx --force > $res/index_build.log 2>&1
echo "index: exit $? ($(( $(date +%s) - t0 )) s)"
for round in 1 2; do
  for fill in fill no-fill; do
    flag=; [[ $fill == no-fill ]] && flag=--no-fill
    timeout 120 $bin/bench_list_cache --index $idx --out $res/cache_bench_${fill}_$round.json \
      --policies vfb:1,qtf,qtfdf --shares 0.6,0.8,0.9 --skip-model $flag > $res/cache_bench_${fill}_$round.log 2>&1
    echo "$fill round $round: exit $? ($(( $(date +%s) - t0 )) s)"
    grep -E "^(baselines|[0-9.]+x:|wrong)" $res/cache_bench_${fill}_$round.log | cut -c1-200
    tar -C /tmp -czf "$OUT/s39d.tar.gz" s39d
  done
done
python3 - $res <<'PY' || true
import json, sys, glob
for f in sorted(glob.glob(sys.argv[1] + "/cache_bench_*.json")):
    j = json.load(open(f)); a = j["gpu_all_resident"]
    print(f.split("/")[-1], "all-resident: call %.2f ms, plan %.2f ms (launches %.2f, list batches %.2f, buffers %.2f), pack %.1f unpack %.1f ms total" % (
        a["call_ms_p50"], 1e3 * a["call_plan_seconds"], 1e3 * a.get("call_launch_plan_seconds", 0), 1e3 * a.get("call_list_batches_seconds", 0), 1e3 * a.get("call_buffers_seconds", 0), a.get("pack_ms", 0), a.get("unpack_ms", 0)))
    for r in j["sweep"]:
        if r["policy"] == "vfb:1":
            lc = r["list_cache"]
            print("  %sx vfb:1 %.1f: %.0f q/s, call %.2f ms, plan %.2f ms (launches %.2f, list batches %.2f, buffers %.2f), pack %.1f unpack %.1f h2d %.1f ms, shipped %.1f MB/batch, cache used %.0f MB" % (
                r["ratio"], r["cache_share"], r["queries_per_second"], r["call_ms_p50"], 1e3 * r["call_plan_seconds"], 1e3 * r.get("call_launch_plan_seconds", 0), 1e3 * r.get("call_list_batches_seconds", 0), 1e3 * r.get("call_buffers_seconds", 0), r.get("pack_ms", 0), r.get("unpack_ms", 0), 1e3 * r["h2d_seconds"], lc["bytes_shipped_per_batch"] / 1e6, lc["device"]["cache_used_bytes"] / 1e6))
PY
timeout $(( 585 - ($(date +%s) - t0) )) $bin/gpu_tests > $res/gpu_tests.log 2>&1
echo "gpu_tests: exit $? ($(( $(date +%s) - t0 )) s)"; grep -E '^\[  (PASSED|FAILED|SKIPPED)' $res/gpu_tests.log | head
cp "$0" $res/; cp $OUT/nvidia-smi.txt $res/ 2>/dev/null
tar -C /tmp -czf "$OUT/s39d.tar.gz" s39d
