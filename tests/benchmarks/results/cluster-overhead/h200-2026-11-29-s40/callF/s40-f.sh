#!/usr/bin/env bash
# Session 40, call F: the final code on the GPU host. Every GPU test (gpu_tests), and the MPI
# cluster cases that run the GPU engine where a device is present (4 ISNs sharing the GPU, the
# GPU fault and fallback, the scheduler) plus the changed ISN loop's cases (joined batches,
# shared thresholds with --pin-cores and joined sharing batches, bad flags), each exact against
# the reference.
set -u
export NCCL_NVLS_ENABLE=0
bin=.gpuhost/s40f/bin
gunzip -f $bin/*.gz && chmod +x $bin/*
export LD_LIBRARY_PATH=/opt/deps/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export GPUSEARCH_DEBS=.gpuhost/rt-debs GPUSEARCH_BIN=$bin
launch/gpu-host.sh deps > /dev/null 2>&1 || true
export PATH=/opt/deps/usr/bin:$PATH
t0=$(date +%s)
res=/tmp/s40f; mkdir -p $res
export GPUSEARCH_TEST_ENGINE=gpu
for c in "share" "fault" "scheduler" "coalesce" "thresholds" "badflags"; do
  timeout 200 tests/mpi/cluster_test.sh .gpuhost/s40f $c > $res/mpi_$c.log 2>&1
  echo "mpi $c: exit $? ($(( $(date +%s) - t0 )) s): $(grep -E '^(PASS|FAIL|SKIPPED)' $res/mpi_$c.log | tail -1)"
done
timeout 300 $bin/gpu_tests > $res/gpu_tests.log 2>&1
echo "gpu_tests: exit $? ($(( $(date +%s) - t0 )) s)"
grep -E "^\[  (PASSED|FAILED|SKIPPED) " $res/gpu_tests.log | head -12
cp "$0" $res/
(cd /tmp && tar czf "$OUT/s40f.tar.gz" s40f)
ls -la "$OUT"
