#!/usr/bin/env bash
# Session 35, call F (issue 11): paper 001's Figure 7 on the synthetic 2.5M index with the final
# code (call E's binaries): every policy. Results in one tarball (the device tool returns at most
# 8 files a call).
set -u
export NCCL_NVLS_ENABLE=0
gunzip -f .gpuhost/s35f/bin/*.gz && chmod +x .gpuhost/s35f/bin/*
export LD_LIBRARY_PATH=/opt/deps/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
GPUSEARCH_BIN=.gpuhost/s35f/bin launch/gpu-host.sh deps > /dev/null 2>&1 || true
bin=.gpuhost/s35f/bin
idx=/tmp/gpusearch-bench-syn2500000
t0=$(date +%s)
if [[ ! -f $idx/manifest.json ]]; then
  timeout 120 $bin/gpusearch -q index --synthetic docs=2500000,seed=7 --out $idx --force > "$OUT/index_build.log" 2>&1
  echo "index exit $? ($(( $(date +%s) - t0 )) s)"
fi
timeout 200 $bin/bench_scheduler --index $idx --out "$OUT/fig7_syn.json" \
  --seconds-per-rate 3 --rate-step 1.25 --bisect-to 1.05 --max-runs 6 --start-rate 100000 \
  > "$OUT/fig7_syn.log" 2>&1
echo "fig7 exit $? ($(( $(date +%s) - t0 )) s)"
grep -E '^(predictor|[a-z:0-9-]+ +sustain)' "$OUT/fig7_syn.log"
cp "$0" "$OUT/"
