#!/usr/bin/env bash
# Builds gpusearch offline on a GPU host, runs the GPU tests and the GPU benchmark in one go,
# and leaves logs and JSON in $OUT (default out/gpu-host). ../shared/GPU-HOST.md explains the
# offline dependency recipe: Debian packages fetched on the build machine into .deps/
# (launch/gpu-host.sh fetch), unpacked here into /opt/deps; real test data copied into
# .gpuhost/data (launch/gpu-host.sh fetch does both).
#
#   launch/gpu-host.sh fetch             # on the build machine (network): .deps/ and .gpuhost/data
#   launch/gpu-host.sh tests             # on the GPU host: build, GPU tests
#   launch/gpu-host.sh bench             # build, 2.5M-document synthetic index, GPU benchmark
#   launch/gpu-host.sh all               # both
# Environment: OUT, BENCH_DOCS (2500000), BENCH_QUERIES (10000), BENCH_CPU_QUERIES (2000),
#              BENCH_ARGS (extra bench_gpu_engine flags), GTEST_FILTER.
set -uo pipefail
cd "$(dirname "$0")/.."
what=${1:-all}

if [[ $what == fetch ]]; then
  set -e
  mkdir -p .deps .gpuhost/data
  (cd .deps && apt-get download libcapnp-dev libcapnp-0.9.2 capnproto libtbb-dev libtbb12 \
     libtbbmalloc2 libtbbbind-2-5 libcli11-dev libfmt-dev libfmt9 nlohmann-json3-dev \
     libxxhash-dev libxxhash0 libgtest-dev zlib1g-dev)
  for d in cranfield msmarco-queries-sample; do
    [[ -d ../shared/data/$d ]] && cp -r ../shared/data/$d .gpuhost/data/
  done
  exit 0
fi

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
cc=gcc-12; cxx=g++-12  # Cap'n Proto 0.9.2's headers do not compile with g++ 13 in C++20 mode
command -v $cxx >/dev/null || { cc=gcc; cxx=g++; }
gen=(); command -v ninja >/dev/null && gen=(-G Ninja)

nvidia-smi > "$OUT/nvidia-smi.txt" 2>&1
start=$(date +%s)
cmake -S . -B build-gpu "${gen[@]}" -DCMAKE_BUILD_TYPE=Release -DGPUSEARCH_CUDA=ON \
  -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_C_COMPILER=$cc -DCMAKE_CXX_COMPILER=$cxx \
  -DCMAKE_CUDA_HOST_COMPILER=$cxx -DCMAKE_PREFIX_PATH=$deps/usr \
  -DCAPNP_EXECUTABLE=$deps/usr/bin/capnp -DCAPNPC_CXX_EXECUTABLE=$deps/usr/bin/capnpc-c++ \
  -DCAPNP_INCLUDE_DIRECTORY=$deps/usr/include -DCAPNPC_IMPORT_DIRS=$deps/usr/include \
  -DGPUSEARCH_SHARED_DATA_DIR="$PWD/.gpuhost/data" > "$OUT/configure.log" 2>&1 \
  || { tail -30 "$OUT/configure.log"; exit 1; }
targets=(gpusearch gpu_tests bench_gpu_engine)
grep -q "bench_cpu_engine" build-gpu/CMakeFiles/TargetDirectories.txt 2>/dev/null && targets+=(bench_cpu_engine)
cmake --build build-gpu -j"$(nproc)" --target "${targets[@]}" > "$OUT/build.log" 2>&1 \
  || { grep -E "error|Error" "$OUT/build.log" | head -40; exit 1; }
echo "build: $(( $(date +%s) - start )) s"

status=0
if [[ $what == tests || $what == all ]]; then
  build-gpu/bin/gpu_tests --gtest_filter="${GTEST_FILTER:-*}" \
    --gtest_output=xml:"$OUT/gpu_tests.xml" > "$OUT/gpu_tests.log" 2>&1 || status=1
  grep -E "^\[  (FAILED|PASSED|SKIPPED) |Failure|error:|Expected|Which is|query " "$OUT/gpu_tests.log" | head -60
  tail -3 "$OUT/gpu_tests.log"
fi
if [[ $what == bench || $what == all ]]; then
  docs=${BENCH_DOCS:-2500000}
  idx=/tmp/gpusearch-bench-syn$docs
  if [[ ! -f $idx/manifest.json ]]; then
    build-gpu/bin/gpusearch -q index --synthetic docs=$docs,seed=7 --out $idx --force \
      > "$OUT/index_build.log" 2>&1 || { tail "$OUT/index_build.log"; exit 1; }
  fi
  echo "index ready: $(( $(date +%s) - start )) s"
  # shellcheck disable=SC2086
  build-gpu/bin/bench_gpu_engine --index $idx --queries $idx/queries.test.tsv \
    --out "$OUT/bench_gpu.json" --limit "${BENCH_QUERIES:-10000}" \
    --cpu-limit "${BENCH_CPU_QUERIES:-2000}" ${BENCH_ARGS:-} 2>&1 | tee "$OUT/bench_gpu.log" | tail -40
fi
echo "total: $(( $(date +%s) - start )) s"
exit $status
