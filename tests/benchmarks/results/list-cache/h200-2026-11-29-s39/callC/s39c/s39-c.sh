#!/usr/bin/env bash
# Session 39, call C (issue 10): the list cache's sweep again at the current code (the H100's
# 2026-11-24 sweep predates sessions 30-38's changes to swaps, admission and compaction): the
# 2.5x and 10x budgets, vfb (lambda 0.75, 1), qtf and qtfdf at S_c / M 0.6, 0.8 and 0.9, the
# whole-shard GPU engine and the CPU engine (16 cores) as baselines, and the throughput model at
# 10x against the measured optimum. Binaries: .gpuhost/s39a/bin (36632a4; no change under gpu/,
# isn/, common/ or partition/ since). About 6 minutes on the H200.
set -u
export NCCL_NVLS_ENABLE=0
export GPUSEARCH_DEBS=.gpuhost/rt-debs
export LD_LIBRARY_PATH=/opt/deps/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export GPUSEARCH_BIN=.gpuhost/s39a/bin
launch/gpu-host.sh deps > /dev/null 2>&1 || true
res=/tmp/s39c; mkdir -p $res
t0=$(date +%s)
bin=.gpuhost/s39a/bin
[[ -f $bin/gpusearch.gz ]] && gunzip -f $bin/*.gz; chmod +x $bin/*
$bin/gpu_tests --gtest_filter='GpuListCache*' > $res/cache_tests.log 2>&1
echo "tests: exit $? ($(( $(date +%s) - t0 )) s)"; grep -E '^\[  (PASSED|FAILED)' $res/cache_tests.log
idx=/tmp/gpusearch-bench-syn2500000
$bin/gpusearch -q index --synthetic docs=2500000,seed=7 --out $idx --force > $res/index_build.log 2>&1
echo "index: exit $? ($(( $(date +%s) - t0 )) s)"
timeout $(( 570 - ($(date +%s) - t0) )) $bin/bench_list_cache --index $idx --out $res/cache_bench.json \
  --model-out $res/cache_model.json --policies vfb:0.75,vfb:1,qtf,qtfdf --shares 0.6,0.8,0.9 \
  --caps 4096,512 --model-ratio 10 --model-shares 0.1,0.3 > $res/cache_bench.log 2>&1
echo "bench: exit $? ($(( $(date +%s) - t0 )) s)"
grep -E "^(baselines|[0-9.]+x|model|wrong|bench_list_cache)" $res/cache_bench.log | cut -c1-220
cp "$0" $res/; cp $OUT/nvidia-smi.txt $res/ 2>/dev/null
tar -C /tmp -czf "$OUT/s39c.tar.gz" s39c
