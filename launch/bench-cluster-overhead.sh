#!/usr/bin/env bash
# The cluster's own cost (issue 16), before and after, in one command: the in-process engine
# (gpusearch search) against the cluster (launch/cluster.sh) built from the code before issue 16
# and from this tree, on the same synthetic index, queries, engine and host, runs interleaved.
# Writes every run's metrics, a combined JSON and a timeline plot to OUT and prints a table.
#
#   launch/bench-cluster-overhead.sh --out OUT [--build DIR] [--before DIR | --before-ref REF]
#       [--engine cpu|gpu] [--docs N] [--seed S] [--queries N] [--batches "64 1024"]
#       [--isns "1 4"] [--reps R] [--variants "before adaptive"] [--index DIR] [--mode M] [--k K]
#
#   --build DIR       this tree's build (default: build/); needs bin/gpusearch,
#                     bin/gpusearch-aggregator, bin/gpusearch-isn
#   --before DIR      a build (DIR/bin/...) of the code before issue 16; default: --before-ref
#                     (410011d, the commit issue 16 started from) is checked out into
#                     OUT/before-src and built into OUT/before-build with the same CMake
#                     settings as --build (compilers, CUDA, package paths; two targets only)
#   --variants        which clusters run: "before" (old binaries, --max-in-flight 2, their
#                     default) and any of "adaptive", "spin", "backoff" (this tree with that
#                     --progress mode and the automatic pipeline depth), each also with the suffix
#                     "_noshare" (--share-thresholds off: the ISNs of the node do not share
#                     thresholds) and "_spare" ((cores - N) / N engine threads per ISN, leaving
#                     each ISN's MPI progress thread a core; e.g. adaptive_spare_noshare) and
#                     "_hotN" (adaptive polls every N us while hot: --hot-poll-us N; the
#                     default 0 yields and polls) and "_window" (--admission window: queries admitted a window ahead, batches
#                     queued at the ISNs, instead of the just-in-time default), "_lagN" and
#                     "_leadN" (just in time, --admission-lag N/10 or -N/10 instead of 0);
#                     "_pin" (--pin-cores auto: each ISN's threads on its own slice of
#                     the cores); "_coalesceN" (--coalesce-batches N: at most N queued
#                     batches join one engine call; 1: a call per batch);
#                     "_noseed" (--share-kth-seeds off: sharing ISNs seed a query from
#                     their own shard's K-th impact bounds, not the node's combined ones);
#                     "_mean" (just in time aimed at the mean compute with a lag of 0.2,
#                     session 29's default: --admission-quantile 0 --admission-lag 0.2) and
#                     "_qNN" (--admission-quantile 0.NN instead of the default 0.7;
#                     _q95: the default before session 49);
#                     "_threadsN" (--threads N: engine threads per ISN, instead of cores / N);
#                     "_refreshN" (--share-refresh N: the shared threshold re-read every N
#                     checks);
#                     "_nounion" (--share-unions off: the slots alone, as before session 32);
#                     "_old" (the --before binaries with this variant's flags, e.g.
#                     adaptive_old against adaptive: the same cluster, old code against new);
#                     "_perquery" (--share-and-first off: and-or sharing ISNs run each query's
#                     OR phase right after its AND phase, as before session 33);
#                     "_sleephand" (--handoff sleep: the merge and engine threads always
#                     wait for work on a condition variable, as before session 32);
#                     "_inorder" (--share-in-order on: sharing ISNs' engine threads take a
#                     batch's queries in batch order, one at a time);
#                     "_cutall" and "_cutfirst" (--admission-cut-on all-answers or
#                     first-answer instead of predicted-finish: just in time, the next batch
#                     cut only once every ISN has answered the batches ahead, as before
#                     session 43, or at the first ISN's answer);
#                     "_admitN" (--admission-threads N: a batch's queries resolved on N threads);
#                     "_engenc" (--answer-thread engine: the ISN's engine thread decodes each
#                     batch and encodes each answer itself, as before session 49, instead of
#                     its MPI thread); "_idmapped" (--id-table mapped: the ISN looks the
#                     answers' external ids up in the shard's mapped files, as before session
#                     50, not in its copy in huge pages);
#                     "_busysend" and "_busyhot" (--busy-poll sending or hot: the MPI
#                     threads poll without yielding while their own sends are unfinished, or
#                     in every hot round);
#                     "_ahead" (--admission-ahead on: just in time, a batch's queries admitted
#                     to be ready when the batch is expected to leave by the mean compute, not
#                     at the aim's cut, after most batches' answers);
#                     "_aggbusy" (--busy-poll hot --isn-busy-poll off: the aggregator's MPI
#                     thread alone polls without a yield while hot);
#                     "_niceN" (--mpi-thread-nice -N: every MPI thread weighted above the
#                     engines' threads);
#                     "_aggniceN" (--mpi-thread-nice -N --isn-mpi-thread-nice 0: the
#                     aggregator's MPI thread alone);
#                     "_eagerN" (--shm-eager-bytes N: Open MPI's shared-memory eager limit;
#                     _eager0 keeps Open MPI's own 4 KiB, the programs' setting before session
#                     46, under which an answer waits for its ISN's MPI progress without CMA;
#                     _eager32768 is session 29's "_eager", which set the environment);
#                     default "before adaptive"
#   --engine          the ISNs' and the in-process engine (default cpu; gpu where built)
#   --docs, --seed    the synthetic index built into OUT/index (default 200000, 7); --index
#                     uses an existing 1-shard index instead; N-ISN runs re-shard it (partition)
#   --split           how N-ISN runs re-shard the index: input-ranges (default), round-robin
#                     or gs-tiers (gpusearch partition --split)
#   --queries         the first N test queries (default 8000)
#   --reps            repeats of every configuration, interleaved (default 3); medians reported
#   --order           rotate (default): rep r runs the variants rotated by r - 1, so that each
#                     runs first in turn (the variant run first after the in-process search
#                     computed 17-45 us a batch longer in one of session 52's orders); fixed:
#                     the --variants order in every rep
#   --summarize-only  no runs: rebuild the JSON and the table from OUT's runs (a device call's
#                     returned runs: without their .answers checks a row says "unchecked";
#                     the machine is the earlier summary's, the index need not be there)
#   --probe-reps R    the fabric probe (default 3; 0: none): every variant at depth 1 on a small
#                     index (4000 documents, OUT/probe-index) with each ISN sleeping 2 ms per batch
#                     instead of computing, so what is left of a batch's wall time beyond the
#                     sleep and the engine is the fabric's own round trip, free of engine noise
#   --latency-reps R  the closed-loop latency check (default 0: none): every variant but
#                     "before", each ISN count, the real engine, batch 64, one batch in flight
#                     (--max-in-flight 1 --window 64: a batch's 64 queries arrive when the one
#                     before is answered), so a query's latency is its batch's turnaround; reports
#                     p50 latency against the slowest ISN's compute per batch (target <= 1.3x)
# Offline: needs only the built trees, python3 (matplotlib for the plot) and mpirun.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out="" build="$root/build" before="" before_ref=410011d engine=cpu docs=200000 seed=7 nq=8000
batches="64 1024" isns="1 4" reps=3 variants="before adaptive" index="" mode=and-or k=10
split=input-ranges
probe_reps=3 latency_reps=0 summarize_only=0 order=rotate
usage() { sed -n '2,30p' "$0" | sed 's/^# \{0,1\}//'; exit "${1:-2}"; }
while [ $# -gt 0 ]; do
  case "$1" in
    --out) out=$2; shift 2 ;;
    --build) build=$2; shift 2 ;;
    --before) before=$2; shift 2 ;;
    --before-ref) before_ref=$2; shift 2 ;;
    --engine) engine=$2; shift 2 ;;
    --docs) docs=$2; shift 2 ;;
    --seed) seed=$2; shift 2 ;;
    --queries) nq=$2; shift 2 ;;
    --batches) batches=$2; shift 2 ;;
    --isns) isns=$2; shift 2 ;;
    --reps) reps=$2; shift 2 ;;
    --order) order=$2; shift 2 ;;
    --probe-reps) probe_reps=$2; shift 2 ;;
    --latency-reps) latency_reps=$2; shift 2 ;;
    --summarize-only) summarize_only=1; shift ;;
    --variants) variants=$2; shift 2 ;;
    --index) index=$2; shift 2 ;;
    --mode) mode=$2; shift 2 ;;
    --k) k=$2; shift 2 ;;
    --split) split=$2; shift 2 ;;
    -h|--help) usage 0 ;;
    *) echo "bench-cluster-overhead: unknown flag $1" >&2; usage 2 ;;
  esac
done
[ -n "$out" ] || { echo "bench-cluster-overhead: --out is required" >&2; usage 2; }
case "$order" in rotate|fixed) ;; *) echo "bench-cluster-overhead: --order $order: rotate or fixed" >&2; exit 2 ;; esac
mkdir -p "$out"
out=$(cd "$out" && pwd)
build=$(cd "$build" && pwd)
for b in gpusearch gpusearch-aggregator gpusearch-isn; do
  [ -x "$build/bin/$b" ] || { echo "bench-cluster-overhead: $build/bin/$b missing (build first)" >&2; exit 2; }
done
gs=$build/bin/gpusearch
log() { echo "== $*"; }

# The code before issue 16: a given build, or built here from --before-ref.
runs=$out/runs
if [ "$summarize_only" = 0 ]; then
if [[ " $variants " == *" before "* ]]; then
  if [ -z "$before" ]; then
    before=$out/before-build
    if [ ! -x "$before/bin/gpusearch-isn" ]; then
      log "building $before_ref (before issue 16) into $before"
      rm -rf "$out/before-src"
      git -C "$root" worktree add --force --detach "$out/before-src" "$before_ref" >/dev/null
      # The after build's settings, so both builds use the same compilers, CUDA and packages.
      mapfile -t defs < <(sed -n -E 's/^((CMAKE_BUILD_TYPE|GPUSEARCH_[A-Z_]+|CMAKE_PREFIX_PATH|CMAKE_[A-Z]+_COMPILER|CMAKE_CUDA_ARCHITECTURES|CMAKE_CUDA_HOST_COMPILER|CMAKE_CXX_FLAGS|[A-Za-z0-9_]+_DIR|CAPNP[A-Z_]*)):(STRING|PATH|FILEPATH|BOOL)=(.*)$/-D\1=\5/p' "$build/CMakeCache.txt" | grep -v -- '-DCMAKE_BUILD_TYPE=$' || true)
      cmake -S "$out/before-src" -B "$before" "${defs[@]}" > "$out/before-cmake.log" 2>&1 ||
        { tail -20 "$out/before-cmake.log"; exit 1; }
      cmake --build "$before" -j"$(nproc)" --target gpusearch-aggregator gpusearch-isn \
        > "$out/before-build.log" 2>&1 || { tail -30 "$out/before-build.log"; exit 1; }
      git -C "$root" worktree remove --force "$out/before-src" >/dev/null 2>&1 || true
    fi
  fi
  before=$(cd "$before" && pwd)
  [ -x "$before/bin/gpusearch-isn" ] || { echo "bench-cluster-overhead: no $before/bin/gpusearch-isn" >&2; exit 2; }
fi

# The index (1 shard) and its re-shardings, and the queries.
if [ -z "$index" ]; then
  index=$out/index
  if [ ! -f "$index/manifest.json" ]; then
    log "indexing $docs synthetic documents (seed $seed) into $index"
    "$gs" -q index --synthetic "docs=$docs,seed=$seed,test_queries=$(( nq > 10000 ? nq : 10000 ))" \
      --out "$index" > "$out/index.log"
  fi
fi
variant_flags() {  # this tree's variant V for N ISNs: sets dir and flags
  # Suffixes: _spare gives each ISN (cores - N) / N engine threads (a core per ISN for its MPI
  # progress thread) instead of cluster.sh's cores / N; _noshare turns shared thresholds off.
  local v=$1 n=$2 p
  dir=$build; flags=(); envs=()
  if [[ $v == *_old* ]]; then  # the --before binaries, with the flags of the rest of the name
    [ -n "$before" ] || { echo "bench-cluster-overhead: variant $v needs --before" >&2; exit 2; }
    dir=$before; v=${v/_old/}
  fi
  if [[ $v =~ _eager([0-9]+) ]]; then  # the shared-memory eager limit (0: Open MPI's own)
    flags+=(--shm-eager-bytes "${BASH_REMATCH[1]}"); v=${v/${BASH_REMATCH[0]}/}
  fi
  if [[ $v == *_spare* ]]; then
    local t=$(( ($(nproc) - n) / n )); [ "$t" -ge 1 ] || t=1
    flags+=(--threads "$t"); v=${v/_spare/}
  fi
  if [[ $v =~ _hot([0-9]+) ]]; then  # adaptive: poll every N us while hot (0: yield and poll)
    flags+=(--hot-poll-us "${BASH_REMATCH[1]}"); v=${v/${BASH_REMATCH[0]}/}
  fi
  if [[ $v == *_window* ]]; then  # closed loop: a window of queries admitted ahead
    flags+=(--admission window); v=${v/_window/}
  fi
  if [[ $v == *_sleephand* ]]; then  # merge and engine threads always sleep for work
    flags+=(--handoff sleep); v=${v/_sleephand/}
  fi
  if [[ $v == *_busysend* ]]; then  # MPI threads poll without yielding while their sends run
    flags+=(--busy-poll sending); v=${v/_busysend/}
  fi
  if [[ $v =~ _aggnice([0-9]+) ]]; then  # the aggregator's MPI thread alone at nice -N
    flags+=(--mpi-thread-nice "-${BASH_REMATCH[1]}" --isn-mpi-thread-nice 0); v=${v/${BASH_REMATCH[0]}/}
  fi
  if [[ $v =~ _nice([0-9]+) ]]; then  # the MPI threads at nice -N (above the engines' threads)
    flags+=(--mpi-thread-nice "-${BASH_REMATCH[1]}"); v=${v/${BASH_REMATCH[0]}/}
  fi
  if [[ $v == *_aggbusy* ]]; then  # the aggregator's MPI thread polls without yielding when hot
    flags+=(--busy-poll hot --isn-busy-poll off); v=${v/_aggbusy/}
  fi
  if [[ $v == *_busyhot* ]]; then  # MPI threads poll without yielding whenever hot
    flags+=(--busy-poll hot); v=${v/_busyhot/}
  fi
  if [[ $v =~ _threads([0-9]+) ]]; then  # N engine threads per ISN (cluster.sh: cores / ISNs)
    flags+=(--threads "${BASH_REMATCH[1]}"); v=${v/${BASH_REMATCH[0]}/}
  fi
  if [[ $v =~ _refresh([0-9]+) ]]; then  # the shared threshold re-read every N checks
    flags+=(--share-refresh "${BASH_REMATCH[1]}"); v=${v/${BASH_REMATCH[0]}/}
  fi
  if [[ $v == *_perquery* ]]; then  # and-or sharing: each query's AND and OR phases together
    flags+=(--share-and-first off); v=${v/_perquery/}
  fi
  if [[ $v == *_inorder* ]]; then  # sharing: the batch's queries in batch order, one at a time
    flags+=(--share-in-order on); v=${v/_inorder/}
  fi
  if [[ $v == *_cutall* ]]; then  # just in time: cut once every ISN has answered
    flags+=(--admission-cut-on all-answers); v=${v/_cutall/}
  fi
  if [[ $v == *_ahead* ]]; then  # just in time: queries admitted for the expected cut
    flags+=(--admission-ahead on); v=${v/_ahead/}
  fi
  if [[ $v =~ _admit([0-9]+) ]]; then  # the admission's resolving on N threads
    flags+=(--admission-threads "${BASH_REMATCH[1]}"); v=${v/${BASH_REMATCH[0]}/}
  fi
  if [[ $v == *_cutfirst* ]]; then  # just in time: cut at the first ISN's answer
    flags+=(--admission-cut-on first-answer); v=${v/_cutfirst/}
  fi
  if [[ $v == *_nounion* ]]; then  # sharing ISNs share thresholds, not the best scores
    flags+=(--share-unions off); v=${v/_nounion/}
  fi
  if [[ $v == *_idmapped* ]]; then  # the answers' ids from the mapped files (before session 50)
    flags+=(--id-table mapped); v=${v/_idmapped/}
  fi
  if [[ $v == *_engenc* ]]; then  # the ISN's engine thread decodes and encodes (before session 49)
    flags+=(--answer-thread engine); v=${v/_engenc/}
  fi
  if [[ $v =~ _coalesce([0-9]+) ]]; then  # at most N queued batches join one engine call
    flags+=(--coalesce-batches "${BASH_REMATCH[1]}"); v=${v/${BASH_REMATCH[0]}/}
  fi
  if [[ $v == *_pin* ]]; then  # each ISN on its own slice of the cores
    flags+=(--pin-cores auto); v=${v/_pin/}
  fi
  if [[ $v == *_noseed* ]]; then  # sharing ISNs seed from their own shard's K-th impacts
    flags+=(--share-kth-seeds off); v=${v/_noseed/}
  fi
  if [[ $v == *_mean* ]]; then  # just in time, session 29's aim: the mean compute, lag 0.2
    flags+=(--admission-quantile 0 --admission-lag 0.2); v=${v/_mean/}
  fi
  if [[ $v =~ _q([0-9]+) ]]; then  # just in time: --admission-quantile 0.NN
    flags+=(--admission-quantile "0.${BASH_REMATCH[1]}"); v=${v/${BASH_REMATCH[0]}/}
  fi
  if [[ $v =~ _(lag|lead)([0-9]+) ]]; then  # just in time: --admission-lag N/10 (lead: -N/10)
    local tenths=${BASH_REMATCH[2]} sign=""; [ "${BASH_REMATCH[1]}" = lead ] && sign=-
    flags+=(--admission-lag "$sign$(printf '%d.%d' $((10#$tenths / 10)) $((10#$tenths % 10)))")
    v=${v/${BASH_REMATCH[0]}/}
  fi
  p=${v%_noshare}
  flags+=(--progress "$p")
  [ "$p" = "$v" ] || flags+=(--share-thresholds off)
}
index_for() {  # the index with N shards
  [ "$1" = 1 ] && { echo "$index"; return; }
  local d="$out/index-s$1"; [ "$split" = input-ranges ] || d="$out/index-s$1-$split"
  [ -f "$d/manifest.json" ] ||
    "$gs" -q partition --index "$index" --out "$d" --shards "$1" --split "$split" --force >&2
  echo "$d"
}
head -"$nq" "$index/queries.test.tsv" > "$out/queries.tsv"
runs=$out/runs
mkdir -p "$runs"

log "$nq queries, mode $mode, k $k, engine $engine, ISNs: $isns, batches: $batches, variants: $variants, $reps rep(s), order $order; $(nproc) cores"
for rep in $(seq 1 "$reps"); do
  for b in $batches; do
    # The in-process engine: the target the cluster is measured against.
    tag="inprocess-batch$b-rep$rep"
    "$gs" -q search --index "$index" --queries "$out/queries.tsv" --mode "$mode" --k "$k" \
      --engine "$engine" --batch-size "$b" --run "$runs/$tag.run" --metrics "$runs/$tag.json" \
      > "$runs/$tag.log" 2>&1 || { tail -20 "$runs/$tag.log"; exit 1; }
    # This rep's order of the variants (--order rotate: each variant runs first in turn).
    read -r -a rep_variants <<< "$variants"
    if [ "$order" = rotate ] && [ "${#rep_variants[@]}" -gt 1 ]; then
      shift_by=$(( (rep - 1) % ${#rep_variants[@]} ))
      rep_variants=("${rep_variants[@]:shift_by}" "${rep_variants[@]:0:shift_by}")
    fi
    for n in $isns; do
      idx=$(index_for "$n")
      for v in "${rep_variants[@]}"; do
        tag="$v-isns$n-batch$b-rep$rep"
        if [ "$v" = before ]; then
          dir=$before; flags=(--max-in-flight 2); envs=()
        else
          variant_flags "$v" "$n"
        fi
        env "${envs[@]}" GPUSEARCH_RUN_TAG="$tag" GPUSEARCH_BUILD_DIR=$dir "$root/launch/cluster.sh" -q --index "$idx" \
          --queries "$out/queries.tsv" --isns "$n" --mode "$mode" --k "$k" \
          --run "$runs/$tag.run" --metrics "$runs/$tag.json" --engine "$engine" \
          --batch-size "$b" --cache-entries 0 --no-verify "${flags[@]}" \
          > "$runs/$tag.log" 2>&1 || { tail -20 "$runs/$tag.log"; exit 1; }
        if "$gs" compare-runs "$runs/inprocess-batch$b-rep1.run" "$runs/$tag.run" \
             > "$runs/$tag.check" 2>&1; then echo equal; else echo DIFFER; fi > "$runs/$tag.answers"
        printf '   %-9s %2s ISN(s) batch %5s rep %s: %s\n' "$v" "$n" "$b" "$rep" "$(
          python3 -c 'import json,sys; m=json.load(open(sys.argv[1])); print("%.0f q/s" % m["queries_per_second"])' "$runs/$tag.json") $(cat "$runs/$tag.answers")"
      done
    done
  done
done

# The fabric probe: depth 1, 2 ms of sleep in place of compute, a tiny index (the engine's
# share is ~0.1-1 ms), 1 ISN and the most ISNs.
probe=$out/probe
if [ "$probe_reps" -gt 0 ]; then
  mkdir -p "$probe"
  pidx=$out/probe-index
  [ -f "$pidx/manifest.json" ] || "$gs" -q index --synthetic "docs=4000,seed=11,test_queries=3000,mean_length=150" \
    --out "$pidx" > /dev/null
  head -1920 "$pidx/queries.test.tsv" > "$probe/queries.tsv"
  max_isns=$(echo $isns | tr ' ' '\n' | sort -n | tail -1)
  log "fabric probe: depth 1, 64-query batches, ISNs sleep 2 ms per batch, $probe_reps rep(s)"
  for rep in $(seq 1 "$probe_reps"); do
    for n in $(echo "1 $max_isns" | tr ' ' '\n' | sort -un); do
      pi=$pidx; [ "$n" = 1 ] || { pi=$out/probe-index-s$n; [ -f "$pi/manifest.json" ] || "$gs" -q partition --index "$pidx" --out "$pi" --shards "$n" --force >&2; }
      for v in $variants; do
        tag="$v-isns$n-rep$rep"
        if [ "$v" = before ]; then dir=$before; flags=(); else variant_flags "$v" "$n"; fi
        env "${envs[@]}" GPUSEARCH_BUILD_DIR=$dir "$root/launch/cluster.sh" -q --index "$pi" --queries "$probe/queries.tsv" \
          --isns "$n" --mode "$mode" --k "$k" --run "$probe/$tag.run" --metrics "$probe/$tag.json" \
          --engine "$engine" --batch-size 64 --cache-entries 0 --no-verify --max-in-flight 1 \
          --inject-delay-ms 2 "${flags[@]}" > "$probe/$tag.log" 2>&1 || { tail -20 "$probe/$tag.log"; exit 1; }
      done
    done
  done
fi

# The closed-loop latency check: the real engine, one batch of 64 in flight at a time.
latency=$out/latency
if [ "$latency_reps" -gt 0 ]; then
  mkdir -p "$latency"
  log "closed-loop latency: batch 64, one batch in flight, window 64, $latency_reps rep(s)"
  for rep in $(seq 1 "$latency_reps"); do
    for n in $isns; do
      idx=$(index_for "$n")
      for v in $variants; do
        [ "$v" = before ] && continue
        variant_flags "$v" "$n"
        tag="$v-isns$n-rep$rep"
        env "${envs[@]}" GPUSEARCH_BUILD_DIR=$dir "$root/launch/cluster.sh" -q --index "$idx" --queries "$out/queries.tsv" \
          --isns "$n" --mode "$mode" --k "$k" --run "$latency/$tag.run" --metrics "$latency/$tag.json" \
          --engine "$engine" --batch-size 64 --cache-entries 0 --no-verify --max-in-flight 1 \
          --window 64 "${flags[@]}" > "$latency/$tag.log" 2>&1 || { tail -20 "$latency/$tag.log"; exit 1; }
        if "$gs" compare-runs "$runs/inprocess-batch64-rep1.run" "$latency/$tag.run" \
             > "$latency/$tag.check" 2>&1; then echo equal; else echo DIFFER; fi > "$latency/$tag.answers"
      done
    done
  done
fi

fi  # summarize_only
[ -n "$index" ] || index=$out/index

python3 - "$out" "$engine" "$mode" "$k" "$nq" "$index" "$summarize_only" "$order" <<'PY'
import glob, json, os, platform, re, statistics, sys
out, engine, mode, k, nq, index = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]), sys.argv[6]
summarize_only = sys.argv[7] == "1"
order = sys.argv[8]  # the variants' order over the reps (--order)
# A run's answers against in process: True (equal), False (they differ) or None (unchecked: the
# .answers file did not come back, as when a device call's tarball keeps only the JSON, or is
# empty, its check cut off by a time limit; a table then says "unchecked" where it cannot say
# "equal").
def answers_equal(path):
    word = open(path).read().strip() if os.path.exists(path) else ""
    return None if not word else word == "equal"
def all_equal(flags):
    flags = list(flags)
    return False if False in flags else (None if None in flags else True)
def answers_word(flag):
    return {True: "equal", False: "DIFFER", None: "unchecked"}[flag]
def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None
# A query's latency against its batch's slowest ISN's compute, per batch from the timeline (the
# ISN's own clock: a duration, no offset needed): (slowest compute, cut to merged) per batch.
def batch_times(m):
    out = []
    for b in (m.get("timeline") or {}).get("batches", []):
        spans = [i["end"] - i["start"] for i in b.get("isn", []) if not i.get("missing")]
        if spans and b.get("merged") is not None and b.get("cut") is not None:
            out.append((max(spans), b["merged"] - b["cut"]))
    return out
runs = []
for f in sorted(glob.glob(os.path.join(out, "runs", "*.json"))):
    name = os.path.basename(f)[:-5]
    m = json.load(open(f))
    if name.startswith("inprocess-"):
        b, rep = re.match(r"inprocess-batch(\d+)-rep(\d+)", name).groups()
        runs.append({"variant": "inprocess", "isns": 0, "batch": int(b), "rep": int(rep),
                     "queries_per_second": m["queries_per_second"], "seconds": m["search_seconds"]})
        continue
    v, n, b, rep = re.match(r"(\w+)-isns(\d+)-batch(\d+)-rep(\d+)", name).groups()
    st = m["stages_ms"]
    nb = m["batches"]["count"] or 1
    slowest = max(i["compute_seconds"] for i in m["isn"])
    def mean(key):
        return st.get(key, {}).get("mean")
    runs.append({
        "variant": v, "isns": int(n), "batch": int(b), "rep": int(rep),
        "queries_per_second": m["queries_per_second"], "seconds": m["seconds"],
        "latency_ms": m["latency_ms"], "batches": nb,
        "slowest_compute_p50_ms": med([c for c, _ in batch_times(m)]),
        "admission": (m.get("admission") or {}).get("mode"),
        "answers_equal_inprocess": answers_equal(os.path.join(out, "runs", name + ".answers")),
        # Wall time per batch that the slowest ISN's engine did not cover: the cluster's own
        # cost, measured the same way for the old and the new code.
        "uncovered_ms_per_batch": 1000 * (m["seconds"] - slowest) / nb,
        "isn_busy_fraction": slowest / m["seconds"] if m["seconds"] else 0,
        "stages_mean_ms": {key: mean(key) for key in st},
        "pipeline_depth": m.get("pipeline_depth", {}).get("mean", m["batch_policy"].get("max_in_flight")),
        "progress": m.get("progress"), "wire": m.get("wire"),
        "isn_progress": [i.get("stats", {}).get("progress") for i in m["isn"]],
        # The engines' work, summed over the ISNs, per query (shared thresholds lower it).
        "docs_scored_per_query": m["counters"]["docs_scored"] / max(1, m["queries"]["run"]),
        "postings_decoded_per_query": m["counters"]["postings_decoded"] / max(1, m["queries"]["run"]),
        "isn_compute_seconds": [i.get("compute_seconds") for i in m["isn"]],
        "share_thresholds": [(i.get("stats", {}).get("share_thresholds") or {}).get("active") for i in m["isn"]],
        "metrics_file": os.path.relpath(f, out)})

inproc = {b: med([r["queries_per_second"] for r in runs if r["variant"] == "inprocess" and r["batch"] == b])
          for b in sorted({r["batch"] for r in runs})}
table = []
for key in sorted({(r["variant"], r["isns"], r["batch"]) for r in runs if r["variant"] != "inprocess"},
                  key=lambda t: (t[1], t[2], t[0] != "before", t[0])):
    rs = [r for r in runs if (r["variant"], r["isns"], r["batch"]) == key]
    s = lambda name: med([r["stages_mean_ms"].get(name) for r in rs if r["stages_mean_ms"].get(name) is not None])
    table.append({"variant": key[0], "isns": key[1], "batch": key[2], "reps": len(rs),
                  "queries_per_second": med([r["queries_per_second"] for r in rs]),
                  "of_inprocess": med([r["queries_per_second"] for r in rs]) / inproc[key[2]] if inproc.get(key[2]) else None,
                  "p50_ms": med([r["latency_ms"]["p50"] for r in rs]),
                  "slowest_compute_p50_ms": med([r["slowest_compute_p50_ms"] for r in rs]),
                  "p50_over_compute": med([r["latency_ms"]["p50"] / r["slowest_compute_p50_ms"]
                                           for r in rs if r["slowest_compute_p50_ms"]]),
                  "admission": rs[0]["admission"],
                  "isn_compute_ms": s("isn_compute_max"), "broadcast_ms": s("broadcast"),
                  "gather_overhead_ms": s("gather_overhead"), "merge_ms": s("merge"),
                  "aggregator_overhead_ms": s("aggregator_overhead"),
                  "uncovered_ms_per_batch": med([r["uncovered_ms_per_batch"] for r in rs]),
                  "isn_busy_fraction": med([r["isn_busy_fraction"] for r in rs]),
                  "depth": med([r["pipeline_depth"] for r in rs if r["pipeline_depth"] is not None]),
                  "docs_scored_per_query": med([r.get("docs_scored_per_query") for r in rs]),
                  "postings_decoded_per_query": med([r.get("postings_decoded_per_query") for r in rs]),
                  "sharing": any(any(x for x in r.get("share_thresholds") or []) for r in rs),
                  "answers_equal": all_equal(r["answers_equal_inprocess"] for r in rs)})
cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
gpu = ""
try:
    import subprocess
    gpu = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True, text=True, timeout=10).stdout.strip()
except Exception:
    pass
probe = []
for f in sorted(glob.glob(os.path.join(out, "probe", "*.json"))):
    v, n, rep = re.match(r"(\w+)-isns(\d+)-rep(\d+)", os.path.basename(f)[:-5]).groups()
    m = json.load(open(f))
    nb = m["batches"]["count"] or 1
    slowest = max(i["compute_seconds"] for i in m["isn"])
    st = m["stages_ms"]
    probe.append({"variant": v, "isns": int(n), "rep": int(rep), "batches": nb,
                  "beyond_sleep_and_compute_ms": 1000 * (m["seconds"] - slowest) / nb - 2.0,
                  "aggregator_overhead_p50_ms": st.get("aggregator_overhead", {}).get("p50"),
                  "to_isn_p50_ms": st.get("to_isn", {}).get("p50"),
                  "from_isn_p50_ms": st.get("from_isn", {}).get("p50"),
                  "merge_p50_ms": st.get("merge", {}).get("p50"),
                  "polling_rounds": (m.get("progress") or {}).get("idle_rounds"),
                  "metrics_file": os.path.relpath(f, out)})
probe_table = []
for key in sorted({(p["variant"], p["isns"]) for p in probe}, key=lambda t: (t[1], t[0] != "before", t[0])):
    ps = [p for p in probe if (p["variant"], p["isns"]) == key]
    g = lambda name: med([p[name] for p in ps if p[name] is not None])
    probe_table.append({"variant": key[0], "isns": key[1], "reps": len(ps),
                        "beyond_sleep_and_compute_ms": g("beyond_sleep_and_compute_ms"),
                        "aggregator_overhead_p50_ms": g("aggregator_overhead_p50_ms"),
                        "to_isn_p50_ms": g("to_isn_p50_ms"), "from_isn_p50_ms": g("from_isn_p50_ms"),
                        "merge_p50_ms": g("merge_p50_ms"),
                        "polling_rounds_per_batch": None if g("polling_rounds") is None else g("polling_rounds") / ps[0]["batches"]})
# Closed-loop latency (depth 1, batch 64): see batch_times above.
latency_runs = []
for f in sorted(glob.glob(os.path.join(out, "latency", "*.json"))):
    name = os.path.basename(f)[:-5]
    v, n, rep = re.match(r"(\w+)-isns(\d+)-rep(\d+)", name).groups()
    m = json.load(open(f))
    bt = batch_times(m)
    compute = [c for c, _ in bt]
    ratios = [t / c for c, t in bt if c > 0]
    answers = os.path.join(out, "latency", name + ".answers")
    latency_runs.append({"variant": v, "isns": int(n), "rep": int(rep),
                         "queries_per_second": m["queries_per_second"],
                         "latency_p50_ms": m["latency_ms"]["p50"], "latency_p99_ms": m["latency_ms"]["p99"],
                         "slowest_compute_p50_ms": med(compute),
                         "cut_to_merged_over_compute_p50": med(ratios),
                         "pipeline_depth_max": m.get("pipeline_depth", {}).get("max"),
                         "answers_equal_inprocess": answers_equal(answers),
                         "metrics_file": os.path.relpath(f, out)})
latency_table = []
for key in sorted({(r["variant"], r["isns"]) for r in latency_runs}, key=lambda t: (t[1], t[0])):
    rs = [r for r in latency_runs if (r["variant"], r["isns"]) == key]
    g = lambda name: med([r[name] for r in rs])
    p50, comp = g("latency_p50_ms"), g("slowest_compute_p50_ms")
    latency_table.append({"variant": key[0], "isns": key[1], "reps": len(rs),
                          "queries_per_second": g("queries_per_second"),
                          "latency_p50_ms": p50, "latency_p99_ms": g("latency_p99_ms"),
                          "slowest_compute_p50_ms": comp,
                          "p50_over_compute": p50 / comp if p50 and comp else None,
                          "cut_to_merged_over_compute_p50": g("cut_to_merged_over_compute_p50"),
                          "answers_equal": all_equal(r["answers_equal_inprocess"] for r in rs)})
machine = {"cpu": cpu, "cores": os.cpu_count(), "gpu": gpu, "host": platform.node(),
           "memory_gib": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1)}
# --summarize-only describes the machine that ran the runs, not this one: the earlier summary's
# machine where there is one, else this machine marked as the summarizer only.
previous = os.path.join(out, "cluster-overhead.json")
if summarize_only:
    try:
        machine = json.load(open(previous))["machine"]
    except (OSError, ValueError, KeyError):
        machine = {"summarized_on": machine, "note": "runs measured elsewhere; their machine is unknown here"}
manifest = os.path.join(index, "manifest.json")
index_docs = (sum(s.get("num_docs", 0) for s in json.load(open(manifest)).get("shards", []))
              if os.path.exists(manifest) else None)  # the index stays on the machine that ran
result = {"machine": machine,
          "config": {"engine": engine, "mode": mode, "k": k, "queries": nq, "index": index,
                     "index_docs": index_docs, "order": order},
          "inprocess_queries_per_second": inproc, "table": table, "runs": runs,
          "probe_table": probe_table, "probe": probe,
          "latency_table": latency_table, "latency": latency_runs}
json.dump(result, open(os.path.join(out, "cluster-overhead.json"), "w"), indent=1)
fmt = "%-16s %4s %6s %9s %6s %8s %7s %8s %9s %9s %7s %9s %9s %6s %5s %9s %9s %5s  %s"
print()
print(fmt % ("variant", "ISNs", "batch", "q/s", "of-in", "p50 ms", "p50/c", "compute", "broadcast", "gather", "merge", "agg-ovh", "uncov/b", "busy", "depth", "docs/q", "post/q", "share", "answers"))
for t in table:
    f = lambda x, p=2: "-" if x is None or x != x else ("%.*f" % (p, x))
    print(fmt % (t["variant"], t["isns"], t["batch"], f(t["queries_per_second"], 0), f(100 * (t["of_inprocess"] or 0), 0) + "%",
                 f(t["p50_ms"]), f(t["p50_over_compute"]), f(t["isn_compute_ms"]), f(t["broadcast_ms"]), f(t["gather_overhead_ms"]),
                 f(t["merge_ms"]), f(t["aggregator_overhead_ms"]), f(t["uncovered_ms_per_batch"]),
                 f(100 * (t["isn_busy_fraction"] or 0), 0) + "%", f(t["depth"], 1),
                 f(t["docs_scored_per_query"], 0), f(t["postings_decoded_per_query"], 0),
                 "on" if t["sharing"] else "off", answers_word(t["answers_equal"])))
print("in process:", ", ".join("batch %d: %.0f q/s" % (b, q) for b, q in inproc.items()))
print("ms per batch (means): compute = slowest ISN's engine; broadcast, gather (round trip - compute), merge as")
print("the metrics define them; agg-ovh = cut to merged less the critical ISN's compute and queue")
print("(new code only); uncov/b = (wall - slowest ISN's engine time) / batches, for both codes.")
print("docs/q, post/q: documents scored and postings decoded per query, summed over the ISNs;")
print("share: whether the ISNs shared thresholds (--share-thresholds; variants *_noshare: off).")
print("p50/c: the queries' p50 latency over the median of each batch's slowest ISN compute (from the")
print("timeline; target <= 1.3 at batch 64); admission just in time unless the variant says _window.")
if probe_table:
    print()
    print("fabric probe (depth 1, batch 64, ISNs sleep 2 ms per batch; medians, ms per batch):")
    pf = "%-16s %4s %22s %14s %8s %9s %7s %10s"
    print(pf % ("variant", "ISNs", "beyond sleep+compute", "agg-ovh p50", "to ISN", "from ISN", "merge", "polls/b"))
    for t in probe_table:
        f = lambda x, p=3: "-" if x is None or x != x else ("%.*f" % (p, x))
        print(pf % (t["variant"], t["isns"], f(t["beyond_sleep_and_compute_ms"]), f(t["aggregator_overhead_p50_ms"]),
                    f(t["to_isn_p50_ms"]), f(t["from_isn_p50_ms"]), f(t["merge_p50_ms"]), f(t["polling_rounds_per_batch"], 0)))
if latency_table:
    print()
    print("closed-loop latency (batch 64, one batch in flight, window 64; medians over reps):")
    lf = "%-16s %4s %9s %10s %10s %14s %12s %16s  %s"
    print(lf % ("variant", "ISNs", "q/s", "p50 ms", "p99 ms", "compute p50", "p50/compute", "per-batch ratio", "answers"))
    for t in latency_table:
        f = lambda x, p=3: "-" if x is None or x != x else ("%.*f" % (p, x))
        print(lf % (t["variant"], t["isns"], f(t["queries_per_second"], 0), f(t["latency_p50_ms"]),
                    f(t["latency_p99_ms"]), f(t["slowest_compute_p50_ms"]), f(t["p50_over_compute"], 2),
                    f(t["cut_to_merged_over_compute_p50"], 2), answers_word(t["answers_equal"])))
    print("p50/compute: the queries' p50 latency over the median of each batch's slowest ISN compute")
    print("(target <= 1.3); per-batch ratio: median over batches of (cut to merged) / slowest compute.")
print("wrote", os.path.join(out, "cluster-overhead.json"))
PY

# The timeline of one run of this tree (the fewest ISNs, the smallest batch).
last=$(ls "$runs"/adaptive-isns*-batch*-rep1.json "$runs"/spin-isns*-batch*-rep1.json 2>/dev/null | sort -V | head -1 || true)
if [ -n "$last" ]; then
  py=python3; /usr/bin/python3 -c "import matplotlib" 2>/dev/null && py=/usr/bin/python3
  "$py" "$root/launch/plot-cluster.py" --timeline "$last" "$out/timeline.png" || true
fi
