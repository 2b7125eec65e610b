#!/usr/bin/env bash
# Runs gpusearch's GPU work on an offline GPU host in one call: build (or binaries carried from
# the build machine), GPU tests, the GPU benchmark against the CPU engine, the real-collection
# cluster comparison, and profiles; logs and JSON land in $OUT (default out/gpu-host).
# ../shared/GPU-HOST.md explains the offline dependency recipe: Debian packages fetched on the
# build machine into .deps/, unpacked here into /opt/deps; real test data copied into
# .gpuhost/data (`launch/gpu-host.sh fetch` does both, plus the Debian descriptions corpus).
#
#   launch/gpu-host.sh fetch        # on the build machine (network): .deps/ and .gpuhost/data
#   launch/gpu-host.sh STEP...      # on the GPU host, steps in order:
#     tests      GPU tests (gpu_tests)
#     sanitize   a small subset of the GPU tests under compute-sanitizer (memcheck, racecheck)
#     bench      2.5M-document synthetic index (built once per host), bench_gpu_engine
#     real       Debian descriptions + MS MARCO queries: cluster.sh with one ISN, cpu vs gpu
#     ncu        Nsight Compute sections of the OR and AND kernels on the synthetic index
#     mpi        the MPI fault test with the fault injected into the GPU engine (CPU fallback)
#     sched      the CPU+GPU scheduler (issue 11): bench_scheduler, open loop at rising Poisson
#                rates with a 500 ms deadline (paper 001 Figure 7: cpu, gpu, best-serial, lbd,
#                queues) on the synthetic index and on Debian + MS MARCO; then the cluster with
#                --scheduler queues on Debian against the CPU engine's run, and 4 ISNs sharing
#                the GPU (tests/mpi/cluster_test.sh share), both exact
#     ranker     second-stage ranking (issue 12): the GPU ranker tests against the CPU twin, then
#                bench_ranker (latency per query against documents per query, 100 to 10,000,
#                for R-S-BLG, R-M-BGD, R-L-D; GPU vs the CPU twin on all cores; copy share) on a
#                synthetic index with a forward index (RANKER_DOCS, default 300000, built once per
#                host), its table and plot (launch/plot-ranker.py)
#     all        tests bench real
# Binaries: build-gpu/ is configured and built here (sm_90, g++ 12), unless GPUSEARCH_BIN names
# a directory of binaries built on the build machine (carried with the tree: saves the build).
# Environment: OUT, BENCH_DOCS (2500000), BENCH_QUERIES (10000), BENCH_CPU_QUERIES (2000),
#              BENCH_ARGS (extra bench_gpu_engine flags), BENCH_K_LIST (10), GTEST_FILTER,
#              REAL_REPEAT (100: times the real query sample is replayed),
#              SCHED_ARGS (extra bench_scheduler flags), SCHED_SECONDS (1.0 per rate),
#              BEFORE_BIN (a directory holding an earlier bench_gpu_engine: run on the same
#              index in the same call, the before/after baseline).
set -uo pipefail
cd "$(dirname "$0")/.."
root=$PWD
steps=("$@")
[ ${#steps[@]} -gt 0 ] || steps=(all)

if [[ ${steps[0]} == fetch ]]; then
  set -e
  mkdir -p .deps .gpuhost/data
  (cd .deps && apt-get download libcapnp-dev libcapnp-0.9.2 capnproto libtbb-dev libtbb12 \
     libtbbmalloc2 libtbbbind-2-5 libcli11-dev libfmt-dev libfmt9 nlohmann-json3-dev \
     libxxhash-dev libxxhash0 libgtest-dev zlib1g-dev)
  for d in cranfield msmarco-queries-sample; do
    [[ -d ../shared/data/$d ]] && cp -r ../shared/data/$d .gpuhost/data/
  done
  # XGBoost's own predictions for the GPU parity test (the GPU host has no python3-xgboost).
  if /usr/bin/python3 -c 'import xgboost' 2>/dev/null; then
    mkdir -p .gpuhost/data/xgboost-parity
    /usr/bin/python3 tests/support/xgboost_parity.py train .gpuhost/data/xgboost-parity 7
  fi
  if [[ -x ../shared/data/make-debian-descriptions.sh ]]; then
    ../shared/data/make-debian-descriptions.sh .gpuhost/debian.jsonl >/dev/null &&
      gzip -c .gpuhost/debian.jsonl > .gpuhost/data/debian-descriptions.jsonl.gz &&
      rm -f .gpuhost/debian.jsonl
  fi
  exit 0
fi

expanded=()
for s in "${steps[@]}"; do
  if [[ $s == all ]]; then expanded+=(tests bench real); else expanded+=("$s"); fi
done

OUT=${OUT:-out/gpu-host}
mkdir -p "$OUT"
deps=/opt/deps
if [[ -d .deps && ! -f $deps/.unpacked ]]; then
  mkdir -p $deps
  for f in .deps/*.deb; do dpkg -x "$f" $deps; done
  # Debian's libz.so points at Debian's zlib soname; use the host's.
  ln -sf "$(ls /lib/x86_64-linux-gnu/libz.so.1 2>/dev/null || ls /usr/lib/x86_64-linux-gnu/libz.so.1)" \
    $deps/usr/lib/x86_64-linux-gnu/libz.so
  touch $deps/.unpacked
fi
export PATH=$deps/usr/bin:/usr/local/cuda/bin:$PATH
export LD_LIBRARY_PATH=$deps/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export GPUSEARCH_SHARED_DATA=$root/.gpuhost/data
nvidia-smi > "$OUT/nvidia-smi.txt" 2>&1
start=$(date +%s)
elapsed() { echo "$(( $(date +%s) - start )) s"; }

if [[ -n ${GPUSEARCH_BIN:-} ]]; then
  bin=$(cd "$GPUSEARCH_BIN" && pwd)
  build_dir=$(dirname "$bin")
  echo "binaries: $bin (carried)"
else
  cc=gcc-12; cxx=g++-12  # Cap'n Proto 0.9.2's headers do not compile with g++ 13 in C++20 mode
  command -v $cxx >/dev/null || { cc=gcc; cxx=g++; }
  gen=(); command -v ninja >/dev/null && gen=(-G Ninja)
  cmake -S . -B build-gpu "${gen[@]}" -DCMAKE_BUILD_TYPE=Release -DGPUSEARCH_CUDA=ON \
    -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_C_COMPILER=$cc -DCMAKE_CXX_COMPILER=$cxx \
    -DCMAKE_CUDA_HOST_COMPILER=$cxx -DCMAKE_PREFIX_PATH=$deps/usr \
    -DCAPNP_EXECUTABLE=$deps/usr/bin/capnp -DCAPNPC_CXX_EXECUTABLE=$deps/usr/bin/capnpc-c++ \
    -DCAPNP_INCLUDE_DIRECTORY=$deps/usr/include -DCAPNPC_IMPORT_DIRS=$deps/usr/include \
    -DGPUSEARCH_SHARED_DATA_DIR="$PWD/.gpuhost/data" > "$OUT/configure.log" 2>&1 \
    || { tail -30 "$OUT/configure.log"; exit 1; }
  targets=(gpusearch gpusearch-aggregator gpusearch-isn gpu_tests bench_gpu_engine bench_cpu_engine
           bench_scheduler bench_ranker)
  cmake --build build-gpu -j"$(nproc)" --target "${targets[@]}" > "$OUT/build.log" 2>&1 \
    || { grep -E "error|Error" "$OUT/build.log" | head -40; exit 1; }
  bin=$root/build-gpu/bin
  build_dir=$root/build-gpu
  echo "build: $(elapsed)"
fi

bench_index() {
  local docs=${BENCH_DOCS:-2500000}
  idx=/tmp/gpusearch-bench-syn$docs
  if [[ ! -f $idx/manifest.json ]]; then
    "$bin/gpusearch" -q index --synthetic docs=$docs,seed=7 --out $idx --force \
      > "$OUT/index_build.log" 2>&1 || { tail "$OUT/index_build.log"; return 1; }
  fi
  echo "synthetic index ready: $(elapsed)"
}

# The Debian descriptions index and the MS MARCO sample repeated $1 times (default 20).
real_data() {
  local repeat=${1:-20}
  corpus=.gpuhost/data/debian-descriptions.jsonl.gz
  queries=.gpuhost/data/msmarco-queries-sample/queries.tsv
  ridx=/tmp/gpusearch-debian
  [[ -f $ridx/manifest.json ]] || "$bin/gpusearch" -q index --corpus $corpus --out $ridx --force \
    > "$OUT/real_index.log" 2>&1 || { tail "$OUT/real_index.log"; return 1; }
  rq=/tmp/gpusearch-real-queries.tsv
  for i in $(seq 1 "$repeat"); do awk -v r=$i -F'\t' '{print r "-" $1 "\t" $2}' $queries; done > $rq
}

status=0
for step in "${expanded[@]}"; do
  case $step in
    tests)
      "$bin/gpu_tests" --gtest_filter="${GTEST_FILTER:-*}" \
        --gtest_output=xml:"$OUT/gpu_tests.xml" > "$OUT/gpu_tests.log" 2>&1 || status=1
      grep -E "^\[  (FAILED|PASSED|SKIPPED) |Failure|error:|Expected|Which is|wrong answers" \
        "$OUT/gpu_tests.log" | head -40
      tail -3 "$OUT/gpu_tests.log"
      echo "tests done: $(elapsed)"
      ;;
    sanitize)
      for tool in ${SANITIZE_TOOLS:-memcheck racecheck}; do
        compute-sanitizer --tool $tool --error-exitcode 9 "$bin/gpu_tests" \
          --gtest_filter='GpuTest.AdversarialQueries:GpuTest.DecoderMatchesCpuDecoderOnEveryBlock' \
          > "$OUT/sanitize_$tool.log" 2>&1 || status=1
        echo "compute-sanitizer $tool: $(grep -E 'ERROR SUMMARY|PASSED|FAILED' "$OUT/sanitize_$tool.log" | tail -3 | tr '\n' ' ')"
      done
      echo "sanitize done: $(elapsed)"
      ;;
    bench)
      bench_index || { status=1; continue; }
      for k in ${BENCH_K_LIST:-10}; do
        if [[ -n ${BEFORE_BIN:-} && -x ${BEFORE_BIN}/bench_gpu_engine ]]; then
          # shellcheck disable=SC2086
          "$BEFORE_BIN/bench_gpu_engine" --index $idx --queries $idx/queries.test.tsv --k $k \
            --out "$OUT/bench_gpu_before_k$k.json" --limit "${BENCH_QUERIES:-10000}" \
            --cpu-limit "${BENCH_CPU_QUERIES:-2000}" ${BEFORE_ARGS:-} > "$OUT/bench_gpu_before_k$k.log" 2>&1
          grep -E "^GPU" "$OUT/bench_gpu_before_k$k.log" | sed 's/^/before: /'
          echo "before bench k=$k done: $(elapsed)"
        fi
        # shellcheck disable=SC2086
        "$bin/bench_gpu_engine" --index $idx --queries $idx/queries.test.tsv --k $k \
          --out "$OUT/bench_gpu_k$k.json" --limit "${BENCH_QUERIES:-10000}" \
          --cpu-limit "${BENCH_CPU_QUERIES:-2000}" ${BENCH_ARGS:-} 2>&1 | tee "$OUT/bench_gpu_k$k.log" \
          | grep -E "^(GPU|CPU|device|wrote)"
        echo "bench k=$k done: $(elapsed)"
      done
      ;;
    real)
      # The sample repeated REAL_REPEAT times (100: 38,600 queries, about a second per engine):
      # enough batches for steady throughput.
      real_data "${REAL_REPEAT:-100}" || { status=1; continue; }
      for engine in cpu gpu; do
        GPUSEARCH_BUILD_DIR=$build_dir launch/cluster.sh --index $ridx --queries $rq --isns 1 \
          --mode and-or --k 10 --engine $engine --run "$OUT/real_$engine.run" \
          --metrics "$OUT/real_$engine.json" > "$OUT/real_$engine.log" 2>&1 || status=1
        python3 - "$OUT/real_$engine.json" "$engine" <<'EOF'
import json, sys
m = json.load(open(sys.argv[1]))
lat = m.get("latency_ms", {})
print(f"real cluster {sys.argv[2]}: {m.get('queries_per_second', '?'):.0f} q/s, "
      f"latency p50 {lat.get('p50', '?')} ms, p99 {lat.get('p99', '?')} ms")
EOF
      done
      "$bin/gpusearch" compare-runs "$OUT/real_cpu.run" "$OUT/real_gpu.run" 2>&1 | tail -2
      echo "real done: $(elapsed)"
      ;;
    sched)
      sched_flags=(--seconds-per-rate "${SCHED_SECONDS:-1.0}" --max-runs 11)
      show='^(index|predictor|[a-z-]+ +(rate|sustained)|queues|lbd|wrote|bench_scheduler)'
      bench_index || { status=1; continue; }
      # shellcheck disable=SC2086
      "$bin/bench_scheduler" --index $idx --out "$OUT/sched_synthetic.json" "${sched_flags[@]}" \
        ${SCHED_ARGS:-} > "$OUT/sched_synthetic.log" 2>&1 || status=1
      grep -E "$show" "$OUT/sched_synthetic.log" | sed 's/^/synthetic: /'
      python3 launch/plot-sched.py "$OUT/sched_synthetic.json" "$OUT/sched_synthetic.png" \
        > "$OUT/sched_synthetic_table.txt" 2>&1 || true
      echo "sched synthetic done: $(elapsed)"
      real_data || { status=1; continue; }
      # The MS MARCO sample: every other query trains the predictor, the rest are the load.
      # shellcheck disable=SC2086
      "$bin/bench_scheduler" --index $ridx --queries $queries --out "$OUT/sched_real.json" \
        "${sched_flags[@]}" ${SCHED_ARGS:-} > "$OUT/sched_real.log" 2>&1 || status=1
      grep -E "$show" "$OUT/sched_real.log" | sed 's/^/real: /'
      python3 launch/plot-sched.py "$OUT/sched_real.json" "$OUT/sched_real.png" \
        > "$OUT/sched_real_table.txt" 2>&1 || true
      echo "sched real done: $(elapsed)"
      # The ISN with --scheduler queues (GPU engine + CPU engine) through the cluster: its run
      # against the CPU engine's, query for query.
      "$bin/gpusearch" -q search --engine cpu --index $ridx --queries $rq --mode and-or --k 10 \
        --run "$OUT/sched_cluster_cpu.run" > /dev/null 2>&1 || status=1
      GPUSEARCH_BUILD_DIR=$build_dir launch/cluster.sh --index $ridx --queries $rq --isns 1 \
        --mode and-or --k 10 --engine gpu --scheduler queues --scheduler-train $queries \
        --run "$OUT/sched_cluster_queues.run" --metrics "$OUT/sched_cluster_queues.json" \
        > "$OUT/sched_cluster_queues.log" 2>&1 || status=1
      "$bin/gpusearch" compare-runs "$OUT/sched_cluster_cpu.run" "$OUT/sched_cluster_queues.run" 2>&1 \
        | tail -1 | sed 's/^/cluster --scheduler queues vs cpu: /'
      python3 - "$OUT/sched_cluster_queues.json" <<'EOF' || true
import json, sys
m = json.load(open(sys.argv[1]))
s = m["isn"][0]["stats"]["scheduler"]
p = s["processors"]
print(f"cluster --scheduler queues: {m['queries_per_second']:.0f} q/s, p99 {m['latency_ms']['p99']} ms; "
      f"jobs cpu {p['cpu']['jobs']} gpu {p['gpu']['jobs']}, stolen {p['cpu']['stolen'] + p['gpu']['stolen']}, "
      f"predictor error cpu {s['predictor']['cpu']['mean_relative_error_held_out']:.3f} "
      f"gpu {s['predictor']['gpu']['mean_relative_error_held_out']:.3f}")
EOF
      # 4 ISNs on this host's GPU(s), round-robin, every answer against the reference.
      GPUSEARCH_TEST_ENGINE=gpu tests/mpi/cluster_test.sh "$build_dir" share > "$OUT/sched_share.log" 2>&1 \
        || status=1
      tail -1 "$OUT/sched_share.log"
      echo "sched done: $(elapsed)"
      ;;
    ncu)
      bench_index || { status=1; continue; }
      # One launch of each main kernel at batch 4096 (the benchmark's OR and AND runs).
      for mode in or and; do
        ncu --section SpeedOfLight --section Occupancy --section WarpStateStats \
          --section SchedulerStats --section LaunchStats \
          --kernel-name "regex:ranked_(or|and)_kernel" --launch-count 1 --launch-skip 2 \
          "$bin/bench_gpu_engine" --index $idx --queries $idx/queries.test.tsv --out /tmp/ncu.json \
          --modes $mode --algorithms window --batch-sizes 4096 --limit 8192 --cpu-limit 64 \
          --latency-limit 0 --verify 0 --cpu-algorithm exhaustive > "$OUT/ncu_$mode.txt" 2>&1 || status=1
        grep -E "Duration|Compute \(SM\) Throughput|Memory Throughput|Achieved Occupancy|Theoretical Occupancy|Issue Slots Busy|Eligible Warps|Registers Per|No Eligible|Warp Cycles Per Issued" \
          "$OUT/ncu_$mode.txt" | sed "s/^/ncu $mode: /" | head -14
      done
      if [[ -n ${BEFORE_BIN:-} && -x ${BEFORE_BIN}/bench_gpu_engine ]]; then
        # The earlier engine's OR kernel (one block per query) under the same sections.
        ncu --section SpeedOfLight --section Occupancy --section WarpStateStats \
          --section SchedulerStats --section LaunchStats \
          --kernel-name "regex:^or_kernel" --launch-count 1 --launch-skip 2 \
          "$BEFORE_BIN/bench_gpu_engine" --index $idx --queries $idx/queries.test.tsv --out /tmp/ncu.json \
          --modes or --algorithms window --batch-sizes 4096 --limit 8192 --cpu-limit 64 \
          --latency-limit 0 --verify 0 --cpu-algorithm exhaustive > "$OUT/ncu_or_before.txt" 2>&1 || status=1
        grep -E "Duration|Compute \(SM\) Throughput|Achieved Occupancy|Issue Slots Busy|Eligible Warps|Registers Per" \
          "$OUT/ncu_or_before.txt" | sed "s/^/ncu or before: /" | head -8
      fi
      echo "ncu done: $(elapsed)"
      ;;
    mpi)
      GPUSEARCH_TEST_ENGINE=gpu tests/mpi/cluster_test.sh "$build_dir" fault > "$OUT/mpi_fault.log" 2>&1 || status=1
      tail -2 "$OUT/mpi_fault.log"
      grep -m1 -E "injected (GPU|engine) fault" "$OUT/mpi_fault.log" 2>/dev/null | cut -c1-200
      echo "mpi done: $(elapsed)"
      ;;
    ranker)
      "$bin/gpu_tests" --gtest_filter='GpuRanker.*' --gtest_output=xml:"$OUT/ranker_tests.xml" \
        > "$OUT/ranker_tests.log" 2>&1 || status=1
      grep -E "^\[  (FAILED|PASSED|SKIPPED) |Failure|Expected|Which is|skipped" "$OUT/ranker_tests.log" | head -30
      tail -3 "$OUT/ranker_tests.log"
      echo "ranker tests done: $(elapsed)"
      # shellcheck disable=SC2086
      "$bin/bench_ranker" --work /tmp/gpusearch-bench-ranker --synthetic-docs "${RANKER_DOCS:-300000}" \
        --out "$OUT/bench_ranker.json" ${RANKER_ARGS:-} > "$OUT/bench_ranker.log" 2>&1 || status=1
      cat "$OUT/bench_ranker.log"
      py=python3; /usr/bin/python3 -c "import matplotlib" 2>/dev/null && py=/usr/bin/python3
      $py launch/plot-ranker.py "$OUT/bench_ranker.json" "$OUT/bench_ranker.png" \
        > "$OUT/bench_ranker_table.md" 2>&1 || true
      cat "$OUT/bench_ranker_table.md"
      echo "ranker done: $(elapsed)"
      ;;
    *) echo "gpu-host.sh: unknown step '$step'" >&2; status=2 ;;
  esac
done
echo "total: $(elapsed)"
exit $status
