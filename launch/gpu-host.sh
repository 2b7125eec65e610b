#!/usr/bin/env bash
# Runs gpusearch's GPU work on an offline GPU host in one call: build (or binaries carried from
# the build machine), GPU tests, the GPU benchmark against the CPU engine, the real-collection
# cluster comparison, and profiles; logs and JSON land in $OUT (default out/gpu-host).
# ../shared/GPU-HOST.md explains the offline dependency recipe: Debian packages fetched on the
# build machine into .deps/, unpacked here into /opt/deps; real test data copied into
# .gpuhost/data (`launch/gpu-host.sh fetch` does both, plus the Debian descriptions corpus).
#
#   launch/gpu-host.sh fetch        # on the build machine (network): .deps/ and .gpuhost/data
#   launch/gpu-host.sh runtime-debs # on the build machine: the runtime .debs alone (GPUSEARCH_DEBS)
#   A device call's own script with carried binaries starts with
#   `source launch/device-env.sh .gpuhost/sNNx/bin` (unpacks them and the runtime .debs).
#   launch/gpu-host.sh STEP...      # on the GPU host, steps in order:
#     tests      GPU tests (gpu_tests)
#     sanitize   a small subset of the GPU tests under compute-sanitizer (SANITIZE_TOOLS: memcheck
#                racecheck; SANITIZE_FILTER: each algorithm on a small index, e.g.
#                'EveryAlgorithm/GpuKernelUnderSanitizer.*/warp', and the decoder)
#     bench      2.5M-document synthetic index (built once per host), bench_gpu_engine
#     real       Debian descriptions + MS MARCO queries: cluster.sh with one ISN, cpu vs gpu
#     ncu        Nsight Compute sections of the OR and AND kernels on the synthetic index
#     mpi        the MPI fault test with the fault injected into the GPU engine (CPU fallback)
#     sched      the CPU+GPU scheduler (issue 11): bench_scheduler, open loop at rising Poisson
#                rates with a 500 ms deadline (paper 001 Figure 7: cpu, gpu, best-serial, lbd,
#                queues) on the synthetic index and on Debian + MS MARCO; then the cluster with
#                --scheduler queues on Debian against the CPU engine's run, and 4 ISNs sharing
#                the GPU (tests/mpi/cluster_test.sh share), both exact
#     sched-capacity  the scheduler's capacity routing (issue 11): bench_scheduler with cpu, gpu,
#                queues-lone-cost (paper 001's routing by lone costs), queues (routing by
#                measured capacity) and queues-specialize (the default routing: the CPU takes
#                the queries it answers cheapest, as many as it keeps up with) on the
#                synthetic index and on Debian + MS MARCO
#                (sched_capacity_{synthetic,real}.{json,log}; read sustained_rate.queues_over_gpu
#                >= 1, queues_over_best_single >= 1.3, against queues-lone-cost_*); then one ISN
#                through the cluster on Debian: the GPU engine alone, --scheduler queues (routing
#                specialize), --scheduler-routing capacity and lone-cost, each against the CPU engine's
#                run (q/s, p99, jobs per processor, measured seconds per predicted second)
#     multigpu   the per-range multi-GPU engine (issue 11) through the ISN on Debian + MS MARCO:
#                --gpus-per-isn 1 --gpu-range-engine, and G = every GPU where there are several,
#                each run against the CPU engine's
#     overhead   the cluster's own cost on this host (issue 16): launch/bench-cluster-overhead.sh
#                with the CPU engine, then the GPU engine, 1 and 4 ISNs, batches 64 and 1,024
#                (OVERHEAD_BEFORE: a build of the code before issue 16, else checked out and
#                built here; OVERHEAD_VARIANTS, OVERHEAD_QUERIES, OVERHEAD_REPS, OVERHEAD_DOCS,
#                OVERHEAD_ISNS ("1 4"), OVERHEAD_BATCHES ("64 1024"), OVERHEAD_SPLIT (input-ranges);
#                OVERHEAD_ENGINES, default "cpu gpu"; variants "X_noshare": --share-thresholds off;
#                OVERHEAD_PROBE_REPS (3), OVERHEAD_LATENCY_REPS (3): the closed-loop latency
#                check, one batch of 64 in flight, p50 latency over the slowest ISN's compute)
#     ceiling    the aggregator's ceiling (issue 16): launch/bench-aggregator-ceiling.sh on Debian +
#                MS MARCO (REAL_REPEAT 100), one ISN, batches 64 and 1,024, CEILING_REPS (3): the ISN
#                with --probe-memo-answers (repeats answered from memory: the cluster's own cost),
#                then the GPU engine searching every query; each with main's aggregator (CEILING_BEFORE:
#                a build dir with bin/gpusearch-aggregator, else 9b3e838's built here) and this one's,
#                interleaved, run files compared byte for byte ($OUT/ceiling-{memo,gpu}/)
#     study      the scaling study launch/studies/gpu-host.json (issue 13; STUDY_SPEC to change),
#                resumable; then the simulator's validation against its points
#     pack       the small result files under $OUT (no indexes, builds or run files) into
#                $OUT/results.tgz, in 15 MB parts if larger (the device tool returns at most 8
#                files of 16 MiB: run it last)
#     cpu        the CPU engine before/after (issue 17): bench_cpu_engine of BEFORE_BIN and of
#                this build, alternating CPU_ROUNDS times (3), on the synthetic index and on
#                Debian + MS MARCO, CPU_SCORINGS (bm25; "bm25 bm25-pr" takes twice as long),
#                CPU_ALGORITHMS (exhaustive,bmw,maxscore), k = 10 and 1000 (launch/bench-cpu-compare.sh);
#                single-thread latency and all-core throughput; the table is $OUT/cpu/compare.md.
#                The "before" binary: BEFORE_BIN, else built here (about a minute on 16 cores)
#                from CPU_BEFORE_SRC or a git worktree at CPU_BEFORE_REF (bca9879)
#     cache      the GPU list cache (issue 10, paper 000): its GPU tests, bench_list_cache on the
#                2.5M-document index (shard at 2.5x and 10x the budget: VFB, Qtf, QtfDf against
#                the whole-shard GPU engine and the CPU engine, the throughput model's split
#                against the measured best, online against offline on a drifting log), and one
#                ISN through cluster.sh with --gpu-mem below the shard's size, against the CPU
#                engine's run
#     cache-drift  the list cache's online policy against its offline plan on a drifting log
#                only (issue 10; about 2 minutes with carried binaries and the index in /tmp,
#                plus about 1 to build it): the online GPU tests, what the log leaves to gain
#                (bench_drift_headroom on the 2.5M index), then bench_list_cache's drift
#                comparison at 10x, DRIFT_LOG (drift_ramp=0.5,drift_topics=8; "query_drift=1"
#                for the earlier runs' log), DRIFT_ONLINE variants (idle:1:0.02:gaps:gaps, the
#                policy as shipped, planning and swapping only between calls; ...:gaps:calls,
#                plans copied in at the start of the next call, as before session 30;
#                idle:0:0:gaps:gaps, every plan), DRIFT_ROUNDS (3) alternating
#                rounds of DRIFT_LIMIT (24000) queries arriving at 4,000/s, one query in
#                DRIFT_SAMPLE (4, as the ISN ships; sessions up to 37 ran 1) replayed by
#                DRIFT_PLANNER_THREADS (1, as the ISN ships; up to 37: 4), half-life 8000,
#                re-plan every DRIFT_REPLAN (4000) served queries (session 38's calls E-H: 1,000
#                replayed at one in 4; the gate's back-off doubles it after each withheld plan,
#                so a 24,000-query log gives the gate 2 looks: DRIFT_REPLAN 1000 for more;
#                sessions up to 37 ran 1000 with every query replayed), both arms
#                admitting with DRIFT_POLICY (vfb:1; qtf: whole lists, nothing replayed); CACHE_ARGS added
#     cache25m-index  builds the 25M-document index (CACHE25M_SPEC, default docs=25000000,
#                seed=7,mean_length=400: estimated 4-6 minutes on 16 cores; at the default
#                mean length 900 about twice that, past one call's 10 minutes) in /tmp
#     cache25m   the 25M-document index (built first, in the same call, unless this machine's
#                /tmp has it: a released machine loses /tmp) served by one GPU through a memory
#                budget of a tenth of its postings: exactness on a sample, throughput against the
#                CPU engine and the whole-shard GPU engine. Run it alone, with carried binaries
#                (GPUSEARCH_BIN=build/bin): the build is cut at CACHE25M_INDEX_LIMIT seconds so
#                that the serving run fits before CACHE25M_DEADLINE (585 s after the start)
#     ranker     second-stage ranking (issue 12): the GPU ranker tests against the CPU twin, then
#                bench_ranker (latency per query against documents per query, 100 to 10,000,
#                for R-S-BLG, R-M-BGD, R-L-D; GPU vs the CPU twin on all cores; copy share) on a
#                synthetic index with a forward index (RANKER_DOCS, default 300000, built once per
#                host), its table and plot (launch/plot-ranker.py)
#     frontend   the RPC front end's added latency (issue 14; CPU only): launch/bench-frontend.sh
#                with the bare Cap'n Proto floor and the cluster blocking, blocking with the loop
#                and the client on CPU 0 at real-time priority (--rpc-thread 0,rt), and spinning
#                (FRONTEND_BUILDS to change), rounds alternating, FRONTEND_RATES
#                ("100 200 400"), FRONTEND_REPEATS (2), FRONTEND_DURATION (6 s): about 6
#                minutes; the table is $OUT/frontend/summary.md (medians over rounds at its end)
#     all        tests bench real
# Binaries: build-gpu/ is configured and built here (sm_90, g++ 12), unless GPUSEARCH_BIN names
# a directory of binaries built on the build machine (carried with the tree: saves the build;
# stripped and gzipped there, `strip -o DIR/X build/bin/X; gzip -9 DIR/*`, unpacked here).
# Environment: OUT, BENCH_DOCS (2500000), BENCH_QUERIES (10000), BENCH_CPU_QUERIES (2000),
#              BENCH_ARGS (extra bench_gpu_engine flags), BENCH_K_LIST (10), GTEST_FILTER,
#              REAL_REPEAT (100: times the real query sample is replayed),
#              SCHED_ARGS (extra bench_scheduler flags), SCHED_SECONDS (1.0 per rate),
#              BEFORE_BIN (a directory holding an earlier bench_gpu_engine, or for `cpu` an
#              earlier bench_cpu_engine: run on the same index in the same call, the
#              before/after baseline), CPU_BEFORE_SRC, CPU_BEFORE_REF, CPU_ROUNDS, CPU_LIMIT
#              (2000 queries), CPU_K (10,1000), CPU_SCORINGS, CPU_ALGORITHMS,
#              CACHE_ARGS (extra bench_list_cache flags), CACHE25M_SPEC, CACHE25M_INDEX_LIMIT,
#              CACHE25M_SERVE_S (150), CACHE25M_DEADLINE (585).
set -uo pipefail
cd "$(dirname "$0")/.."
root=$PWD
steps=("$@")
[ ${#steps[@]} -gt 0 ] || steps=(all)

if [[ ${steps[0]} == runtime-debs ]]; then
  # The runtime libraries alone, copied from .deps (fetch first): for calls that carry
  # prebuilt binaries and run them with GPUSEARCH_DEBS=.gpuhost/rt-debs.
  set -e
  [[ -d .deps ]] || { echo "runtime-debs: no .deps here; run 'launch/gpu-host.sh fetch' first" >&2; exit 2; }
  mkdir -p .gpuhost/rt-debs
  for p in libcapnp-0.9.2 libtbb12 libtbbmalloc2 libtbbbind-2-5 libfmt9 libxxhash0 libxgboost0 \
           libdmlc0 libgomp1; do
    cp .deps/${p}_*.deb .gpuhost/rt-debs/
  done
  exit 0
fi

if [[ ${steps[0]} == fetch ]]; then
  set -e
  mkdir -p .deps .gpuhost/data
  (cd .deps && apt-get download libcapnp-dev libcapnp-0.9.2 capnproto libtbb-dev libtbb12 \
     libtbbmalloc2 libtbbbind-2-5 libcli11-dev libfmt-dev libfmt9 nlohmann-json3-dev \
     libxxhash-dev libxxhash0 libgtest-dev zlib1g-dev libxgboost-dev libxgboost0 libdmlc0 libgomp1)
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
# GPUSEARCH_DEBS names the folder of .deb files (default .deps). Runs of prebuilt binaries need
# only the runtime libraries: `launch/gpu-host.sh runtime-debs` puts them in .gpuhost/rt-debs
# (3.4 MB against .deps' 7 MB), for calls near the device tool's 64 MiB limit.
debs=${GPUSEARCH_DEBS:-.deps}
if [[ -d $debs && ! -f $deps/.unpacked ]]; then
  mkdir -p $deps
  for f in "$debs"/*.deb; do dpkg -x "$f" $deps; done
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
  # Binaries carried gzipped (the tree plus carry must stay under the device tool's 64 MiB).
  if compgen -G "$bin/*.gz" > /dev/null; then gunzip -f "$bin"/*.gz; fi
  chmod +x "$bin"/* 2>/dev/null || true
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
           bench_scheduler bench_list_cache bench_ranker bench_rpc_floor bench_drift_headroom)
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

# The 25M-document index (CACHE25M_SPEC) in this machine's /tmp, built unless there; the build
# stops at CACHE25M_INDEX_LIMIT seconds (default: what leaves CACHE25M_SERVE_S, 150 s, for
# serving it before CACHE25M_DEADLINE, 585 s after the script's start), and then says how far it
# got, so that a smaller spec can be chosen.
cache25m_index() {
  local spec=${CACHE25M_SPEC:-docs=25000000,seed=7,mean_length=400}
  idx25=/tmp/gpusearch-cache25m
  if [[ -f $idx25/manifest.json && "$(cat $idx25/spec.txt 2>/dev/null)" == "$spec" ]]; then
    echo "cache25m index ($spec) already here: $(elapsed)"
    return 0
  fi
  local limit=${CACHE25M_INDEX_LIMIT:-$(( ${CACHE25M_DEADLINE:-585} - ${CACHE25M_SERVE_S:-150} - ($(date +%s) - start) ))}
  (( limit > 30 )) || { echo "cache25m index: no time left to build (${limit} s)"; return 1; }
  local t0; t0=$(date +%s)
  timeout "$limit" "$bin/gpusearch" index --synthetic "$spec" --out $idx25 --force \
    > "$OUT/cache25m_index.log" 2>&1
  local rc=$?
  grep -E "indexed|postings .*bits|docs/s" "$OUT/cache25m_index.log" | tail -4
  if (( rc != 0 )); then
    (( rc == 124 )) && echo "cache25m index: stopped after ${limit} s ($spec); a smaller spec" \
      "(CACHE25M_SPEC, e.g. mean_length=300) or carried binaries (GPUSEARCH_BIN) leave more time"
    tail -3 "$OUT/cache25m_index.log"
    rm -rf $idx25
    return 1
  fi
  echo "$spec" > $idx25/spec.txt
  du -sh $idx25 | sed 's/^/cache25m index size: /'
  echo "cache25m index ($spec) built in $(( $(date +%s) - t0 )) s: $(elapsed)"
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
          --gtest_filter="${SANITIZE_FILTER:-EveryAlgorithm/GpuKernelUnderSanitizer.*:GpuTest.DecoderMatchesCpuDecoderOnEveryBlock}" \
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
        --cost-log "$OUT/sched_synthetic_costs.tsv" ${SCHED_ARGS:-} > "$OUT/sched_synthetic.log" 2>&1 \
        || status=1
      grep -E "$show" "$OUT/sched_synthetic.log" | sed 's/^/synthetic: /'
      python3 launch/plot-sched.py "$OUT/sched_synthetic.json" "$OUT/sched_synthetic.png" \
        > "$OUT/sched_synthetic_table.txt" 2>&1 || true
      echo "sched synthetic done: $(elapsed)"
      real_data || { status=1; continue; }
      # The MS MARCO sample: every other query trains the predictor, the rest are the load.
      # shellcheck disable=SC2086
      "$bin/bench_scheduler" --index $ridx --queries $queries --out "$OUT/sched_real.json" \
        "${sched_flags[@]}" --cost-log "$OUT/sched_real_costs.tsv" ${SCHED_ARGS:-} \
        > "$OUT/sched_real.log" 2>&1 || status=1
      grep -E "$show" "$OUT/sched_real.log" | sed 's/^/real: /'
      python3 launch/plot-sched.py "$OUT/sched_real.json" "$OUT/sched_real.png" \
        > "$OUT/sched_real_table.txt" 2>&1 || true
      echo "sched real done: $(elapsed)"
      # The ISN with --scheduler queues (GPU engine + CPU engine) through the cluster: its run
      # against the CPU engine's, query for query; batches pipelined through the scheduler (4 in
      # flight, the default) and one batch at a time (1), in the same call.
      "$bin/gpusearch" -q search --engine cpu --index $ridx --queries $rq --mode and-or --k 10 \
        --run "$OUT/sched_cluster_cpu.run" > /dev/null 2>&1 || status=1
      for in_flight in 4 1; do
        tag=sched_cluster_queues; [ $in_flight = 1 ] && tag=sched_cluster_queues_one_batch
        GPUSEARCH_BUILD_DIR=$build_dir launch/cluster.sh --index $ridx --queries $rq --isns 1 \
          --mode and-or --k 10 --engine gpu --scheduler queues --scheduler-train $queries \
          --scheduler-batches-in-flight $in_flight --max-in-flight 4 \
          --run "$OUT/$tag.run" --metrics "$OUT/$tag.json" > "$OUT/$tag.log" 2>&1 || status=1
        "$bin/gpusearch" compare-runs "$OUT/sched_cluster_cpu.run" "$OUT/$tag.run" 2>&1 \
          | tail -1 | sed "s/^/cluster --scheduler queues, $in_flight batch(es) in flight, vs cpu: /"
        python3 - "$OUT/$tag.json" <<'EOF' || true
import json, sys
m = json.load(open(sys.argv[1]))
s = m["isn"][0]["stats"]["scheduler"]
p = s["processors"]
print(f"cluster --scheduler queues ({s.get('batches_in_flight', 1)} in flight, peak "
      f"{s.get('peak_batches_in_flight', 1)}): {m['queries_per_second']:.0f} q/s, p99 {m['latency_ms']['p99']} ms; "
      f"jobs cpu {p['cpu']['jobs']} gpu {p['gpu']['jobs']}, stolen {p['cpu']['stolen'] + p['gpu']['stolen']}, "
      f"busy s cpu {p['cpu']['busy_seconds']:.2f} gpu {p['gpu']['busy_seconds']:.2f}, "
      f"predictor error cpu {s['predictor']['cpu']['mean_relative_error_held_out']:.3f} "
      f"gpu {s['predictor']['gpu']['mean_relative_error_held_out']:.3f}; online (CPU jobs): "
      f"{s['predictor'].get('online', {}).get('cpu_mean_relative_error_online', float('nan')):.3f}, "
      f"{s['predictor'].get('online', {}).get('refits', 0)} refits")
EOF
      done
      # 4 ISNs on this host's GPU(s), round-robin, every answer against the reference.
      GPUSEARCH_TEST_ENGINE=gpu tests/mpi/cluster_test.sh "$build_dir" share > "$OUT/sched_share.log" 2>&1 \
        || status=1
      tail -1 "$OUT/sched_share.log"
      echo "sched done: $(elapsed)"
      ;;
    sched-capacity)
      sched_flags=(--seconds-per-rate "${SCHED_SECONDS:-1.0}" --max-runs 11
                   --configs "cpu,gpu,queues-lone-cost,queues,queues-specialize")
      show='^(index|predictor|[a-z-]+ +sustained|queues)'
      bench_index || { status=1; continue; }
      # shellcheck disable=SC2086
      "$bin/bench_scheduler" --index $idx --out "$OUT/sched_capacity_synthetic.json" \
        "${sched_flags[@]}" ${SCHED_ARGS:-} > "$OUT/sched_capacity_synthetic.log" 2>&1 || status=1
      grep -E "$show" "$OUT/sched_capacity_synthetic.log" | sed 's/^/synthetic: /'
      echo "sched-capacity synthetic done: $(elapsed)"
      real_data || { status=1; continue; }
      # shellcheck disable=SC2086
      "$bin/bench_scheduler" --index $ridx --queries $queries \
        --out "$OUT/sched_capacity_real.json" "${sched_flags[@]}" ${SCHED_ARGS:-} \
        > "$OUT/sched_capacity_real.log" 2>&1 || status=1
      grep -E "$show" "$OUT/sched_capacity_real.log" | sed 's/^/real: /'
      echo "sched-capacity real done: $(elapsed)"
      # One ISN through the cluster on Debian at its closed-loop throughput: the GPU engine
      # alone, then the scheduler under its default routing (specialize), by capacity and by
      # lone costs; every run against the CPU engine's.
      "$bin/gpusearch" -q search --engine cpu --index $ridx --queries $rq --mode and-or --k 10 \
        --run "$OUT/sched_capacity_cpu.run" > /dev/null 2>&1 || status=1
      for tag in gpu_alone queues_specialize queues_capacity queues_lone_cost; do
        case $tag in
          gpu_alone) extra=() ;;
          queues_specialize) extra=(--scheduler queues --scheduler-train "$queries") ;;
          queues_capacity)
            extra=(--scheduler queues --scheduler-routing capacity --scheduler-train "$queries") ;;
          *) extra=(--scheduler queues --scheduler-routing lone-cost --scheduler-train "$queries") ;;
        esac
        GPUSEARCH_BUILD_DIR=$build_dir launch/cluster.sh --index $ridx --queries $rq --isns 1 \
          --mode and-or --k 10 --engine gpu "${extra[@]}" --max-in-flight 4 \
          --run "$OUT/sched_capacity_$tag.run" --metrics "$OUT/sched_capacity_$tag.json" \
          > "$OUT/sched_capacity_$tag.log" 2>&1 || status=1
        "$bin/gpusearch" compare-runs "$OUT/sched_capacity_cpu.run" "$OUT/sched_capacity_$tag.run" \
          2>&1 | tail -1 | sed "s/^/cluster $tag vs cpu: /"
        python3 - "$OUT/sched_capacity_$tag.json" "$tag" <<'EOF' || true
import json, sys
m = json.load(open(sys.argv[1]))
line = f"cluster {sys.argv[2]}: {m['queries_per_second']:.0f} q/s, p99 {m['latency_ms']['p99']} ms"
s = m["isn"][0]["stats"].get("scheduler")
if s:
    p = s["processors"]
    line += f"; jobs cpu {p['cpu']['jobs']} gpu {p['gpu']['jobs']}, stolen {p['cpu']['stolen'] + p['gpu']['stolen']}"
    c = s.get("capacity")
    if c:
        line += (f"; s/pred cpu {c['cpu']['seconds_per_predicted_second']:.3f} "
                 f"gpu {c['gpu']['seconds_per_predicted_second']:.4f}, theta {c['theta']:.3g}")
print(line)
EOF
      done
      echo "sched-capacity done: $(elapsed)"
      ;;
    multigpu)
      # The per-range multi-GPU engine (--gpus-per-isn G; gpu/multi_gpu_engine.hpp) through the
      # ISN on Debian + MS MARCO: G = 1 with --gpu-range-engine on any host, and G = every GPU
      # of the host where it has more than one; each run against the CPU engine's.
      real_data "${REAL_REPEAT:-20}" || { status=1; continue; }
      "$bin/gpusearch" -q search --engine cpu --index $ridx --queries $rq --mode and-or --k 10 \
        --run "$OUT/multigpu_cpu.run" > /dev/null 2>&1 || status=1
      gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
      for g in 1 $([ "${gpus:-1}" -gt 1 ] && echo "$gpus"); do
        GPUSEARCH_BUILD_DIR=$build_dir launch/cluster.sh --index $ridx --queries $rq --isns 1 \
          --mode and-or --k 10 --engine gpu --gpus-per-isn $g --gpu-range-engine \
          --run "$OUT/multigpu_g$g.run" --metrics "$OUT/multigpu_g$g.json" \
          > "$OUT/multigpu_g$g.log" 2>&1 || status=1
        "$bin/gpusearch" compare-runs "$OUT/multigpu_cpu.run" "$OUT/multigpu_g$g.run" 2>&1 \
          | tail -1 | sed "s/^/multi-GPU engine, G = $g, vs cpu: /"
        python3 - "$OUT/multigpu_g$g.json" <<'EOF' || true
import json, sys
m = json.load(open(sys.argv[1]))
e = m["isn"][0]["stats"]
print(f"multi-GPU engine: engine {e.get('engine')}, {m['queries_per_second']:.0f} q/s, "
      f"p99 {m['latency_ms']['p99']} ms")
EOF
      done
      echo "multigpu done: $(elapsed)"
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
    overhead)
      ov_before=(); [[ -n ${OVERHEAD_BEFORE:-} ]] && ov_before=(--before "$OVERHEAD_BEFORE")
      for engine in ${OVERHEAD_ENGINES:-cpu gpu}; do
        ov_index=(--docs "${OVERHEAD_DOCS:-1000000}")
        [[ $engine == gpu && -f $OUT/overhead-cpu/index/manifest.json ]] &&
          ov_index=(--index "$OUT/overhead-cpu/index")
        [[ $engine == gpu && ${#ov_before[@]} -eq 0 && -d $OUT/overhead-cpu/before-build ]] &&
          ov_before=(--before "$OUT/overhead-cpu/before-build")
        launch/bench-cluster-overhead.sh --out "$OUT/overhead-$engine" --build "$build_dir" \
          "${ov_before[@]}" --engine $engine "${ov_index[@]}" --queries "${OVERHEAD_QUERIES:-20000}" \
          --batches "${OVERHEAD_BATCHES:-64 1024}" --isns "${OVERHEAD_ISNS:-1 4}" --reps "${OVERHEAD_REPS:-3}" \
          --split "${OVERHEAD_SPLIT:-input-ranges}" \
          --variants "${OVERHEAD_VARIANTS:-before adaptive spin}" \
          --probe-reps "${OVERHEAD_PROBE_REPS:-3}" --latency-reps "${OVERHEAD_LATENCY_REPS:-3}" \
          > "$OUT/overhead_$engine.log" 2>&1 \
          || status=1
        sed -n '/^variant /,/^wrote /p' "$OUT/overhead_$engine.log" | sed "s/^/overhead $engine: /" | head -60
        echo "overhead $engine done: $(elapsed)"
      done
      ;;
    ceiling)
      real_data "${REAL_REPEAT:-100}" || { status=1; continue; }
      ce_before=(); [[ -n ${CEILING_BEFORE:-} ]] && ce_before=(--before "$CEILING_BEFORE")
      for ce in memo gpu; do
        ce_flags=(--engine cpu); [[ $ce == gpu ]] && ce_flags=(--engine gpu --no-memo)
        [[ $ce == gpu && ${#ce_before[@]} -eq 0 && -d $OUT/ceiling-memo/before-build ]] &&
          ce_before=(--before "$OUT/ceiling-memo/before-build")
        launch/bench-aggregator-ceiling.sh --out "$OUT/ceiling-$ce" --build "$build_dir" \
          "${ce_before[@]}" --index $ridx --queries $rq "${ce_flags[@]}" --batches "64 1024" \
          --reps "${CEILING_REPS:-3}" ${CEILING_ARGS:-} > "$OUT/ceiling_$ce.log" 2>&1 || status=1
        sed -n '/^ batch /,/^wrote /p' "$OUT/ceiling_$ce.log" | sed "s/^/ceiling $ce: /"
        echo "ceiling $ce done: $(elapsed)"
      done
      ;;
    study)
      spec=${STUDY_SPEC:-launch/studies/gpu-host.json}
      GPUSEARCH_BUILD_DIR=$build_dir launch/study.sh "$spec" --out "$OUT/study" \
        --index-cache /tmp/gpusearch-study-indexes > "$OUT/study.log" 2>&1 || status=1
      grep -E "point|done|skip|error" "$OUT/study.log" | tail -30
      /usr/bin/python3 launch/study-simulate "$OUT/study" > "$OUT/study_simulate.log" 2>&1 ||
        echo "study-simulate: failed or numpy missing (rerun it on the build machine)"
      tail -15 "$OUT/study_simulate.log"
      echo "study done: $(elapsed)"
      ;;
    pack)
      # The small files under $OUT (JSON, logs, tables, plots; no indexes, builds, run files or
      # query logs), in one archive; the rest is deleted.
      (cd "$OUT" && find . -type f -size -4M ! -name '*.run' ! -name 'run[0-9]*.txt' ! -name '*.tsv' \
          ! -path '*index*' ! -path '*/before-*' ! -name results.tgz -print0 |
        tar czf /tmp/gpusearch-results.tgz --null -T - &&
        find . -mindepth 1 -maxdepth 1 -exec rm -rf {} + && mv /tmp/gpusearch-results.tgz results.tgz)
      # The device tool returns files of at most 16 MiB: larger archives go in parts
      # (cat results.tgz.part-* | tar xz).
      if [[ $(stat -c %s "$OUT/results.tgz") -gt 15000000 ]]; then
        (cd "$OUT" && split -b 15000000 results.tgz results.tgz.part- && rm results.tgz)
      fi
      ls -la "$OUT"
      ;;
    cpu)
      # The "before" bench_cpu_engine: BEFORE_BIN if it holds one, else built here (CPU only, the
      # after build's compiler and packages) from CPU_BEFORE_SRC (a source tree of the issue's
      # "before", e.g. `git archive bca9879 | tar -x -C cpu-before-src` carried with the tree)
      # or, where the tree has its git history, from a worktree at CPU_BEFORE_REF (bca9879).
      cpu_before=${BEFORE_BIN:-}
      if [[ ! -x $cpu_before/bench_cpu_engine ]]; then
        cpu_before=$OUT/cpu-before-build/bin
        if [[ ! -x $cpu_before/bench_cpu_engine ]]; then
          src=${CPU_BEFORE_SRC:-}
          if [[ -z $src ]]; then
            src=$OUT/cpu-before-src
            rm -rf "$src"
            git -C "$root" worktree add --force --detach "$src" "${CPU_BEFORE_REF:-bca9879}" \
              > "$OUT/cpu-before-src.log" 2>&1 || src=""
          fi
          if [[ -n $src && -f $src/CMakeLists.txt ]]; then
            bcc=${cc:-gcc-12} bcxx=${cxx:-g++-12}
            command -v "$bcxx" > /dev/null || { bcc=gcc; bcxx=g++; }
            bgen=(); command -v ninja > /dev/null && bgen=(-G Ninja)
            { cmake -S "$src" -B "$OUT/cpu-before-build" "${bgen[@]}" -DCMAKE_BUILD_TYPE=Release \
                -DGPUSEARCH_CUDA=OFF -DCMAKE_C_COMPILER=$bcc -DCMAKE_CXX_COMPILER=$bcxx \
                -DCMAKE_PREFIX_PATH=$deps/usr -DCAPNP_EXECUTABLE=$deps/usr/bin/capnp \
                -DCAPNPC_CXX_EXECUTABLE=$deps/usr/bin/capnpc-c++ \
                -DCAPNP_INCLUDE_DIRECTORY=$deps/usr/include -DCAPNPC_IMPORT_DIRS=$deps/usr/include &&
              cmake --build "$OUT/cpu-before-build" -j"$(nproc)" --target bench_cpu_engine; } \
              > "$OUT/cpu-before-build.log" 2>&1 || tail -20 "$OUT/cpu-before-build.log"
            echo "cpu: before built from $src: $(elapsed)"
          fi
        fi
      fi
      if [[ ! -x $cpu_before/bench_cpu_engine ]]; then
        echo "cpu: no earlier bench_cpu_engine: set BEFORE_BIN (a directory holding it) or" \
          "CPU_BEFORE_SRC (a source tree of bca9879)" >&2
        status=1; continue
      fi
      bench_index || { status=1; continue; }
      real_data 1 || { status=1; continue; }
      BEFORE_BIN=$cpu_before AFTER_BIN=$bin SYN_INDEX=$idx DEBIAN_INDEX=$ridx QUERIES=$queries \
        OUT="$OUT/cpu" ROUNDS=${CPU_ROUNDS:-3} LIMIT=${CPU_LIMIT:-2000} K=${CPU_K:-10,1000} \
        SCORINGS=${CPU_SCORINGS:-bm25} BEFORE_ALGORITHMS=${CPU_ALGORITHMS:-exhaustive,bmw,maxscore} \
        AFTER_ALGORITHMS=${CPU_ALGORITHMS:-exhaustive,bmw,maxscore} launch/bench-cpu-compare.sh > "$OUT/cpu.log" 2>&1 || status=1
      grep -E "best before|round . done" "$OUT/cpu.log" | tail -12
      echo "cpu done: $(elapsed)"
      ;;
    cache)
      "$bin/gpu_tests" --gtest_filter='GpuListCache*' --gtest_output=xml:"$OUT/cache_tests.xml" \
        > "$OUT/cache_tests.log" 2>&1 || status=1
      grep -E "^\[  (FAILED|PASSED|SKIPPED) |Failure|Expected|Which is" "$OUT/cache_tests.log" | head -20
      tail -1 "$OUT/cache_tests.log"
      echo "cache tests done: $(elapsed)"
      bench_index || { status=1; continue; }
      docs=${BENCH_DOCS:-2500000}
      # shellcheck disable=SC2086
      "$bin/bench_list_cache" --index $idx --out "$OUT/cache_bench.json" \
        --model-out "$OUT/cache_model.json" --drift-spec "docs=$docs,seed=7" \
        --policies vfb:0.75,vfb:1,vfb:1+tails,qtf,qtfdf --shares 0.6,0.8,0.9 --caps 4096,512 \
        --model-ratio 10 --model-shares 0.1,0.3 \
        ${CACHE_ARGS:-} > "$OUT/cache_bench.log" 2>&1 || status=1
      grep -E "^(baselines|[0-9.]+x|model|drifting|  online policy|  offline plan|wrong|bench_list_cache)" "$OUT/cache_bench.log"
      echo "cache bench done: $(elapsed)"
      # One ISN with --gpu-mem a fifth of the shard's postings (plus its resident arrays), the
      # cache planned from the training log and following the queries; its run against the CPU
      # engine's.
      budget=$(python3 -c "import json; j=json.load(open('$OUT/cache_bench.json')); print(int(j['resident_bytes'] + j['posting_bytes'] / 5))") \
        || { status=1; continue; }
      head -2000 $idx/queries.test.tsv > /tmp/gpusearch-cache-queries.tsv
      "$bin/gpusearch" -q search --engine cpu --index $idx --queries /tmp/gpusearch-cache-queries.tsv \
        --mode and --k 10 --run "$OUT/cache_cluster_cpu.run" > /dev/null 2>&1 || status=1
      GPUSEARCH_BUILD_DIR=$build_dir launch/cluster.sh --index $idx \
        --queries /tmp/gpusearch-cache-queries.tsv --isns 1 --mode and --k 10 --engine gpu \
        --gpu-mem "$budget" --cache-train $idx/queries.train.tsv --cache-lambda 0.9 --cache-online \
        --run "$OUT/cache_cluster_gpu.run" --metrics "$OUT/cache_cluster_gpu.json" \
        > "$OUT/cache_cluster_gpu.log" 2>&1 || status=1
      "$bin/gpusearch" compare-runs "$OUT/cache_cluster_cpu.run" "$OUT/cache_cluster_gpu.run" 2>&1 \
        | tail -1 | sed 's/^/cluster --gpu-mem vs cpu: /'
      python3 - "$OUT/cache_cluster_gpu.json" <<'EOF' || true
import json, sys
m = json.load(open(sys.argv[1]))
lc = m["isn"][0]["stats"].get("list_cache", {})
print(f"cluster --gpu-mem: {m['queries_per_second']:.0f} q/s; hit rate {lc.get('hit_rate_bytes', 0):.3f} "
      f"(bytes), post-processed {lc.get('post_processed_fraction', 0):.3f}, "
      f"{lc.get('bytes_shipped_per_batch', 0) / 1e6:.1f} MB shipped per batch")
EOF
      # Plots (throughput, hit rate, post-processed fraction against S_c / M) and the sweep's
      # table, where a python with matplotlib is at hand (else: run it on the build machine).
      if /usr/bin/python3 -c "import matplotlib" 2>/dev/null; then
        /usr/bin/python3 launch/plot-list-cache.py "$OUT/cache_bench.json" "$OUT" \
          > "$OUT/cache_table.md" 2> "$OUT/cache_plots.log" \
          || echo "cache plots failed: $(tail -1 "$OUT/cache_plots.log")"
      else
        echo "cache plots: no matplotlib here; on the build machine:" \
          "/usr/bin/python3 launch/plot-list-cache.py cache_bench.json DIR"
      fi
      echo "cache done: $(elapsed)"
      ;;
    cache-drift)
      "$bin/gpu_tests" --gtest_filter='GpuListCache*Online*' \
        --gtest_output=xml:"$OUT/cache_drift_tests.xml" > "$OUT/cache_drift_tests.log" 2>&1 || status=1
      grep -E "^\[  (FAILED|PASSED|SKIPPED) |Failure|Expected|Which is" "$OUT/cache_drift_tests.log" | head -20
      echo "cache-drift tests done: $(elapsed)"
      bench_index || { status=1; continue; }
      docs=${BENCH_DOCS:-2500000}
      drift_log=${DRIFT_LOG:-drift_ramp=0.5,drift_topics=8}
      drift_limit=${DRIFT_LIMIT:-24000}
      if [[ -x $bin/bench_drift_headroom ]]; then
        "$bin/bench_drift_headroom" --index $idx --out "$OUT/cache_drift_headroom.json" \
          --spec "docs=$docs,seed=7,test_queries=$drift_limit,query_drift=1,$drift_log" \
          --online --sample 1 --half-life 8000 --replan 1000 --max-pending 4000 2>&1 \
          | sed 's/^/headroom: /' || status=1
      else
        echo "headroom: no bench_drift_headroom in $bin (skipped)"
      fi
      # shellcheck disable=SC2086
      "$bin/bench_list_cache" --index $idx --out "$OUT/cache_drift.json" \
        --drift-spec "docs=$docs,seed=7" --drift-log "$drift_log" --ratios 10 --skip-sweep \
        --skip-model --drift-limit "$drift_limit" --drift-sample "${DRIFT_SAMPLE:-4}" --drift-half-life 8000 \
        --drift-replan "${DRIFT_REPLAN:-4000}" --drift-max-pending 4000 --drift-planner-threads "${DRIFT_PLANNER_THREADS:-1}" \
        --drift-rounds "${DRIFT_ROUNDS:-3}" \
        --drift-online "${DRIFT_ONLINE:-idle:1:0.02:gaps:gaps,idle:1:0.02:gaps:calls,idle:0:0:gaps:gaps}" \
        --drift-policy "${DRIFT_POLICY:-vfb:1}" \
        ${CACHE_ARGS:-} > "$OUT/cache_drift.log" 2>&1 || status=1
      grep -E "^(baselines|drifting|  online policy|  swaps|  call ms|  offline plan|wrong|bench_list_cache)" "$OUT/cache_drift.log"
      echo "cache-drift done: $(elapsed)"
      ;;
    cache25m-index)
      cache25m_index || { status=1; continue; }
      ;;
    cache25m)
      # One call: the index is built here when this machine's /tmp lacks it (a machine released
      # between calls loses /tmp), then served. With carried binaries (GPUSEARCH_BIN) the build
      # at the default spec takes about 5 minutes on 16 cores and the serving run 1-2.
      cache25m_index || { status=1; continue; }
      left=$(( ${CACHE25M_DEADLINE:-585} - ($(date +%s) - start) ))
      (( left > 30 )) || { echo "cache25m: no time left to serve the index (${left} s)"; status=1; continue; }
      # shellcheck disable=SC2086
      timeout $left "$bin/bench_list_cache" --index $idx25 --out "$OUT/cache25m.json" --ratios 10 \
        --policies vfb:1,qtf --shares 0.8 --skip-model --limit 10000 --cpu-limit 2000 --check 100 \
        --train-limit 5000 ${CACHE_ARGS:-} > "$OUT/cache25m.log" 2>&1 || status=1
      grep -E "^(baselines|[0-9.]+x|wrong|bench_list_cache)" "$OUT/cache25m.log"
      echo "cache25m done: $(elapsed)"
      ;;
    frontend)
      fb="floor-block=$build_dir@block floor-placed=$build_dir@block%0,rt"
      fb+=" new-block=$build_dir@block new-placed=$build_dir@block%0,rt"
      fb+=" floor-spin-both=$build_dir@spin,spin new-spin-both=$build_dir@spin,spin"
      launch/bench-frontend.sh --out "$OUT/frontend" --builds "${FRONTEND_BUILDS:-$fb}" \
        --rates "${FRONTEND_RATES:-100 200 400}" --repeats "${FRONTEND_REPEATS:-2}" \
        --duration "${FRONTEND_DURATION:-6}" > "$OUT/frontend.log" 2>&1 || status=1
      sed -n '/^Medians over rounds/,$p' "$OUT/frontend/summary.md" 2>/dev/null || tail -20 "$OUT/frontend.log"
      rm -rf "$OUT/frontend/index" "$OUT"/frontend/*.cluster-run.txt  # rebuilt in seconds; large
      echo "frontend done: $(elapsed)"
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
