#!/usr/bin/env bash
# Runs the gpusearch cluster under mpirun: rank 0 the aggregator, ranks 1..N the ISNs (one per
# index shard). Prints the mpirun command it runs.
#
#   launch/cluster.sh --index DIR --queries FILE|- --isns N [--gpus-per-isn G] [--hostfile F]
#                     [--mode M] [--k K] --run OUT [--metrics OUT.json] [more flags...]
#   launch/cluster.sh --index DIR --listen ADDR:PORT --isns N ... --run OUT [--metrics OUT.json]
#
# --listen serves live queries over Cap'n Proto RPC (gpusearch query / gpusearch load --connect
# ADDR:PORT) until a shutdown request (gpusearch query --connect ADDR --shutdown --token-file
# OUT.token) or SIGTERM to this script; then the run and metrics are written. The bound ADDR:PORT
# goes to OUT.address (or --address-file F) while serving: port 0 picks a free one.
# More flags go to both programs; each ignores the other's (see gpusearch-aggregator --help and
# gpusearch-isn --help): e.g. --batch-size, --max-wait-us, --cost-buckets, --max-in-flight,
# --max-depth, --admission, --admission-quantile, --admission-lag, --window, --cache-entries, --deadline-ms, --qps
# (aggregator); --engine, --algorithm, --intra-query, --threads, --inject-engine-fault-at-batch,
# --inject-delay-ms, --inject-delay-rank, --inject-compute-ms, --inject-compute-rank, --answer-thread,
# --id-table,
# --gpu-mem and the --cache-* flags of the GPU list cache, --share-thresholds on|off|auto,
# --pin-cores off|auto|CPUS (ISN); --progress, --spin-us,
# --hot-poll-us, --max-sleep-us (both). Two-stage ranking (issue 12): --ranker-store DIR,
# --ranker-cache-mb MB, --ranker-cache-policy coordinated|per-isn-lru (both); --ranker NAME |
# --ranker-mix EXPONENT [--ranker-mix-seed S], --candidates N (aggregator); --ranker-backend (ISN).
# Without --threads, each ISN gets cores / N threads on a single node.
# Environment: GPUSEARCH_BUILD_DIR (default build), GPUSEARCH_MPIRUN_ARGS (extra mpirun flags),
# GPUSEARCH_ISN_PREFIX (words run in front of every ISN: a profiler or counter, e.g.
# "build/bin/bench_hw_counters --out-dir DIR --"; GPUSEARCH_RUN_TAG then reaches the ISNs too).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${GPUSEARCH_BUILD_DIR:-$root/build}
usage() { awk 'NR > 1 && !/^#/ { exit } NR > 1' "$0" | sed 's/^# \{0,1\}//'; exit "${1:-2}"; }

index="" queries="" listen="" address_file="" token_file="" isns="" gpus=1 hostfile="" mode=or k=10 run="" metrics="" threads_given=0
pass=()
while [ $# -gt 0 ]; do
  case "$1" in
    --index) index=$2; shift 2 ;;
    --queries) queries=$2; shift 2 ;;
    --listen) listen=$2; shift 2 ;;
    --address-file) address_file=$2; shift 2 ;;
    --operator-token-file) token_file=$2; shift 2 ;;
    --isns) isns=$2; shift 2 ;;
    --gpus-per-isn) gpus=$2; shift 2 ;;
    --hostfile) hostfile=$2; shift 2 ;;
    --mode) mode=$2; shift 2 ;;
    --k) k=$2; shift 2 ;;
    --run) run=$2; shift 2 ;;
    --metrics) metrics=$2; shift 2 ;;
    -h|--help) usage 0 ;;
    --threads) threads_given=1; pass+=("$1" "$2"); shift 2 ;;
    *) pass+=("$1"); shift ;;
  esac
done
[ -n "$index" ] && { [ -n "$queries" ] || [ -n "$listen" ]; } && [ -n "$isns" ] && [ -n "$run" ] || {
  echo "cluster.sh: --index, --queries (or --listen), --isns and --run are required" >&2; usage 2; }
[ -n "$queries" ] && [ -n "$listen" ] && {
  echo "cluster.sh: give --queries (replay) or --listen (serve), not both" >&2; exit 2; }
[ -f "$index/manifest.json" ] || { echo "cluster.sh: no index at $index" >&2; exit 2; }
[ -n "$listen" ] || [ "$queries" = - ] || [ -r "$queries" ] || { echo "cluster.sh: cannot read queries $queries" >&2; exit 2; }
shards=$(python3 -c 'import json,sys; print(len(json.load(open(sys.argv[1]))["shards"]))' "$index/manifest.json" 2>/dev/null || echo "")
if [ -n "$shards" ] && [ "$shards" != "$isns" ]; then
  echo "cluster.sh: the index $index has $shards shard(s) but --isns is $isns: one ISN serves one shard" \
       "(re-shard with: build/bin/gpusearch partition --index $index --out OUT --shards $isns)" >&2
  exit 2
fi

agg=$build/bin/gpusearch-aggregator
isn=$build/bin/gpusearch-isn
if [ ! -x "$agg" ] || [ ! -x "$isn" ]; then
  echo "cluster.sh: building the aggregator and the ISN"
  [ -f "$build/CMakeCache.txt" ] || cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release >/dev/null
  cmake --build "$build" -j"${GPUSEARCH_BUILD_JOBS:-$(nproc)}" --target gpusearch-aggregator gpusearch-isn
fi

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# --enable-recovery: a rank that dies (kill -9 of an ISN) does not take the job down with it; the
# aggregator leaves the dead ISN out after --isn-dead-after missed deadlines, answers partially,
# and ends the job itself (tests/benchmarks/NOTES-frontend.md, "ISN death"). GPUSEARCH_NO_RECOVERY=1
# leaves it out (mpirun then kills the whole job when any rank dies).
mpi=(mpirun --oversubscribe --bind-to none)
[ -n "${GPUSEARCH_NO_RECOVERY:-}" ] || mpi+=(--enable-recovery)
[ -n "$hostfile" ] && mpi+=(--hostfile "$hostfile")
# shellcheck disable=SC2206
[ -n "${GPUSEARCH_MPIRUN_ARGS:-}" ] && mpi+=(${GPUSEARCH_MPIRUN_ARGS})
isn_prefix=()
if [ -n "${GPUSEARCH_ISN_PREFIX:-}" ]; then
  # shellcheck disable=SC2206
  isn_prefix=(${GPUSEARCH_ISN_PREFIX})
  [ -n "${GPUSEARCH_RUN_TAG:-}" ] && mpi+=(-x GPUSEARCH_RUN_TAG)
fi
isn_extra=()
if [ "$threads_given" = 0 ] && [ -z "$hostfile" ]; then
  t=$(( $(nproc) / isns )); [ "$t" -ge 1 ] || t=1
  isn_extra+=(--threads "$t")
fi
# The aggregator writes this file just before it aborts the job for a stuck ISN; mpirun (Open MPI
# 4.1.4) was seen to crash or hang in its own teardown after an abort, so it is killed if it has
# not ended 10 s later, with exit code 3.
marker=$(mktemp -u "${TMPDIR:-/tmp}/gpusearch-abort-XXXXXX")
# Every rank writes it too before it aborts for a bad flag (mpirun --enable-recovery exits 0).
export GPUSEARCH_ABORT_MARKER=$marker
mpi+=(-x GPUSEARCH_ABORT_MARKER)
agg_args=(--index "$index" --mode "$mode" --k "$k" --run "$run" --abort-marker "$marker")
if [ -n "$listen" ]; then
  token_file=${token_file:-$run.token}
  address_file=${address_file:-$run.address}
  agg_args+=(--listen "$listen" --operator-token-file "$token_file" --address-file "$address_file")
else
  agg_args+=(--queries "$queries")
fi
[ -n "$metrics" ] && agg_args+=(--metrics "$metrics")
# The ISNs get the run's mode and k too: a scheduler that predicts costs trains on them at
# start-up rather than in the first batch.
isn_args=(--index "$index" --gpus-per-isn "$gpus" --mode "$mode" --k "$k")
cmd=("${mpi[@]}" -n 1 "$agg" "${agg_args[@]}" "${pass[@]}" : -n "$isns" "${isn_prefix[@]}" "$isn" "${isn_args[@]}" "${isn_extra[@]}" "${pass[@]}")
echo "+ ${cmd[*]}"
"${cmd[@]}" <&0 &  # explicit: a background job's standard input would be /dev/null (--queries -)
pid=$!
if [ -n "$listen" ]; then
  # Serving: SIGTERM or Ctrl-C ends the run through the operator's shutdown request, so that
  # the answers in flight are finished and the run and metrics written (mpirun would kill the
  # ISNs first). The aggregator handles SIGTERM itself too, when sent to it directly.
  stop_serving() {
    local addr=$listen
    [ -n "$address_file" ] && [ -s "$address_file" ] && addr=$(head -1 "$address_file")
    "$build/bin/gpusearch" query --connect "$addr" --shutdown --token-file "$token_file" >&2 ||
      kill "$pid" 2>/dev/null
  }
  trap stop_serving INT TERM
else
  trap 'kill "$pid" 2>/dev/null' INT TERM
fi
waited=0
agg_pid="" agg_gone=0
while kill -0 "$pid" 2>/dev/null; do
  # With --enable-recovery mpirun outlives a crashed aggregator, and the ISNs would wait for it
  # forever: when the aggregator (a child of mpirun on this host) is gone and mpirun has not
  # ended 10 s later, it is killed.
  [ -n "$agg_pid" ] || agg_pid=$(pgrep -P "$pid" -f "gpusearch-aggregator" | head -1 || true)
  if [ -n "$agg_pid" ] && ! kill -0 "$agg_pid" 2>/dev/null && [ ! -e "$marker" ]; then
    agg_gone=$((agg_gone + 1))
    if [ "$agg_gone" -gt 50 ]; then
      echo "cluster.sh: the aggregator ended but mpirun did not within 10 s; killing it" >&2
      children=$(pgrep -P "$pid" || true)
      kill -9 "$pid" $children 2>/dev/null || true
      wait "$pid" 2>/dev/null
      exit 1
    fi
  fi
  if [ -e "$marker" ]; then
    waited=$((waited + 1))
    if [ "$waited" -gt 50 ]; then
      echo "cluster.sh: mpirun did not end 10 s after the aggregator aborted the job; killing it" >&2
      children=$(pgrep -P "$pid" || true)
      kill -9 "$pid" $children 2>/dev/null || true
      code=$(head -1 "$marker"); rm -f "$marker"
      exit "${code:-3}"
    fi
  fi
  sleep 0.2
done
set +e
wait "$pid"
rc=$?
set -e
# The aggregator ended the job: for a stuck ISN (3) or after an error (1).
[ -e "$marker" ] && { code=$(head -1 "$marker"); rm -f "$marker"; rc=${code:-3}; }
exit "$rc"
