#!/usr/bin/env bash
# MPI integration tests of the cluster (launch/cluster.sh under mpirun --oversubscribe):
#   cluster_test.sh BUILD_DIR exact N      answers equal the reference engine's, N ISNs, modes
#                                          and/or/and-or, k 10 and 1000 (cost buckets, result
#                                          cache and 3 batches in flight on)
#   cluster_test.sh BUILD_DIR real DATA    the same on Cranfield (exit 77: skipped, no data)
#   cluster_test.sh BUILD_DIR slow         a slow ISN: partial answers within the deadline, no hang
#   cluster_test.sh BUILD_DIR fault        injected engine fault: CPU fallback, every answer exact
#   cluster_test.sh BUILD_DIR malformed    malformed query lines (file and stdin) reported, counted
#   cluster_test.sh BUILD_DIR mismatch     ISN count != shard count: a clear error, no hang
#   cluster_test.sh BUILD_DIR openloop     replay at a fixed arrival rate (--qps): paced, exact
#   cluster_test.sh BUILD_DIR stuck        an ISN that never answers: run and metrics complete,
#                                          the job ends (MPI_Abort) instead of hanging
#   cluster_test.sh BUILD_DIR depths       pipeline depths 1..8 and automatic, window and
#                                          just-in-time admission: every answer exact, the run
#                                          file in arrival order, the same bytes for all
#   cluster_test.sh BUILD_DIR admission    batches of a known compute (--inject-compute-ms): just
#                                          in time none queues at the ISNs, window ones do
#   cluster_test.sh BUILD_DIR cuts         just in time with one slow ISN (--inject-compute-rank):
#                                          --admission-cut-on first-answer queues batches at it,
#                                          predicted-finish and all-answers do not; all exact;
#                                          --admission-threads 3 exact; --admission-ahead on
#                                          (with --busy-poll hot, sending) exact with both cuts
#   cluster_test.sh BUILD_DIR scheduler    --scheduler queues and lbd (the reference engine as the
#                                          second processor): every answer exact, jobs counted
#   cluster_test.sh BUILD_DIR badflags     unknown --scheduler, --gpus-per-isn 0, unknown
#                                          --gpu-split: clear errors, no MPI_Abort
#   cluster_test.sh BUILD_DIR share        4 ISNs, --engine gpu: sharing the node's GPU round-robin
#                                          (where the ISNs report the GPU engine), or on no device
#                                          the CPU engine with a clear message; exact
#   cluster_test.sh BUILD_DIR death        kill -9 of an ISN mid-run: it is declared dead, every
#                                          query is answered (partially after), run and metrics
#                                          written, the job ends (exit 3) instead of aborting
#   cluster_test.sh BUILD_DIR rpc          the live front end (--listen): gpusearch load and query
#                                          answers equal the replay's; bad token refused; SIGTERM
#                                          ends the run with run and metrics written
#   cluster_test.sh BUILD_DIR ranker       two-stage ranking (issue 12): the cluster's run equals
#                                          `gpusearch search` with the same ranker flags (a Zipf
#                                          mix, own rankers in the third column, one --ranker),
#                                          under both --ranker-cache-policy values, with batches
#                                          in flight and the result cache on; coordinated: no
#                                          unplanned load or eviction on any ISN, the commands
#                                          counted; per-isn-lru: none sent
#   cluster_test.sh BUILD_DIR badranker    a malformed ranker file and an unknown ranker: their
#                                          queries answered by the first stage, flagged, the errors
#                                          naming the file and the store; nothing lost
#   cluster_test.sh BUILD_DIR thresholds   4 ISNs sharing each query's k-th score (--share-thresholds
#                                          on): and, or, and-or at k 10 and 1000 equal the
#                                          reference; every ISN shared; fewer documents scored and
#                                          postings decoded than with it off; one ISN alone says
#                                          there is nothing to share
#   cluster_test.sh BUILD_DIR multigpu     launch/multi-gpu-runs.sh (issue 15) with the CPU engine:
#                                          every phase's rows exact, the summary JSON's fields, a
#                                          second call resumes (runs nothing again), bad flags
#   cluster_test.sh BUILD_DIR eager        Open MPI without its single-copy transport (as on the
#                                          H200 host): a 256 KiB message reaches its receiver while
#                                          the sender sleeps with --shm-eager-bytes' default, and
#                                          waits for it with 0; clusters with the default, with 0
#                                          and with the user's own OMPI_MCA eager limit: exact, the
#                                          limit in effect in every rank's metrics; bad values
#   cluster_test.sh BUILD_DIR overheadsummary  launch/bench-cluster-overhead.sh on a tiny index (one
#                                          ISN, one rep): table and JSON; then --summarize-only
#                                          over the runs alone, as a device call returns them
#                                          (no answer checks, no index): "unchecked", the first
#                                          summary's machine kept
#   cluster_test.sh BUILD_DIR scalingpairs launch/summarize-isn-scaling.py on made-up runs: reps
#                                          paired, a rep without its pair left out, gzipped
#                                          metrics read, two calls pooled, a bad folder named
#   cluster_test.sh BUILD_DIR rpcdeadline  a request whose deadline passes before its answer (a
#                                          slow ISN) is answered at the deadline, flagged, not
#                                          after the answer; the cluster still runs it
set -euo pipefail
build=$(cd "$1" && pwd)
case_name=$2
root=$(cd "$(dirname "$0")/../.." && pwd)
export GPUSEARCH_BUILD_DIR=$build OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
gs=$build/bin/gpusearch
tmp=$(mktemp -d /tmp/gpusearch-mpi-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
metric() {  # metric FILE PYTHON-EXPR-ON-m
  python3 -c 'import json,os,sys; m=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$1" "$2"
}
synthetic_index() {  # synthetic_index SHARDS DIR
  "$gs" -q index --synthetic "docs=4000,seed=11,train_queries=5,test_queries=150,mean_length=150" \
    --shards "$1" --out "$2" >/dev/null
}
cluster() { "$root/launch/cluster.sh" -q "$@"; }
# serve ARGS...: a serving cluster (--listen on a free loopback port) in the background, its
# output in $tmp/serve.txt; sets $serving and $addr. A failing check must not leave it behind:
# the EXIT trap stops it (SIGTERM: shutdown), then makes sure.
serve() {
  rm -f "$tmp/addr"
  "$root/launch/cluster.sh" -q --listen 127.0.0.1:0 --address-file "$tmp/addr" "$@" \
    > "$tmp/serve.txt" 2>&1 &
  serving=$!
  trap 'if kill -0 "$serving" 2>/dev/null; then kill -TERM "$serving" || true; sleep 3;
    pkill -9 -P "$serving" || true; kill -9 "$serving" 2>/dev/null || true; fi; rm -rf "$tmp"' EXIT
  for _ in $(seq 1 300); do [ -s "$tmp/addr" ] && break; sleep 0.1; done
  [ -s "$tmp/addr" ] || { cat "$tmp/serve.txt"; fail "the front end did not start listening"; }
  addr=$(cat "$tmp/addr")
}
# stop_serving: SIGTERM ends the serving run; it must exit 0 within 30 s.
stop_serving() {
  kill -TERM "$serving"
  for _ in $(seq 1 300); do kill -0 "$serving" 2>/dev/null || break; sleep 0.1; done
  kill -0 "$serving" 2>/dev/null && { kill -9 "$serving"; fail "SIGTERM did not end the serving run"; }
  wait "$serving" || { cat "$tmp/serve.txt"; fail "serving run exit code $?"; }
}
check_equal() {  # check_equal INDEX QUERIES ISNS MODE K [cluster flags...]
  local index=$1 queries=$2 isns=$3 mode=$4 k=$5
  shift 5
  local tag="$isns-$mode-$k"
  "$gs" -q search --engine reference --index "$index" --queries "$queries" --mode "$mode" --k "$k" \
    --run "$tmp/ref-$tag.txt" >/dev/null
  cluster --index "$index" --queries "$queries" --isns "$isns" --mode "$mode" --k "$k" \
    --run "$tmp/run-$tag.txt" --metrics "$tmp/m-$tag.json" "$@" > "$tmp/out-$tag.txt" 2>&1 ||
    { cat "$tmp/out-$tag.txt"; fail "cluster run $tag exited $?"; }
  "$gs" compare-runs "$tmp/ref-$tag.txt" "$tmp/run-$tag.txt" || fail "run $tag differs from the reference"
  [ "$(metric "$tmp/m-$tag.json" 'm["queries"]["partial"]')" = 0 ] || fail "$tag: partial answers"
}

case "$case_name" in
  exact)
    n=$3
    synthetic_index "$n" "$tmp/idx"
    # Repeat some queries so that the result cache answers them.
    { cat "$tmp/idx/queries.test.tsv"; head -30 "$tmp/idx/queries.test.tsv" | sed 's/^/r/'; } > "$tmp/q.tsv"
    head -40 "$tmp/idx/queries.test.tsv" > "$tmp/q40.tsv"
    for mode in and or and-or; do
      check_equal "$tmp/idx" "$tmp/q.tsv" "$n" "$mode" 10 --batch-size 16 --cost-buckets \
        --cache-entries 1000 --max-in-flight 3
      check_equal "$tmp/idx" "$tmp/q40.tsv" "$n" "$mode" 1000 --batch-size 8
    done
    hits=$(metric "$tmp/m-$n-or-10.json" 'm["queries"]["cache_hits"]')
    [ "$hits" -ge 30 ] || fail "expected at least 30 cache hits, got $hits"
    echo "PASS: $n ISN(s): and, or, and-or at k 10 and 1000 equal the reference ($hits cache hits)"
    ;;
  real)
    data=$3
    if [ ! -s "$data/corpus.jsonl" ] || [ ! -s "$data/queries.tsv" ]; then
      echo "SKIPPED: no Cranfield collection at $data (set GPUSEARCH_SHARED_DATA_DIR)"; exit 77
    fi
    "$gs" -q index --corpus "$data/corpus.jsonl" --shards 2 --out "$tmp/cran" >/dev/null
    for mode in and or and-or; do
      check_equal "$tmp/cran" "$data/queries.tsv" 2 "$mode" 10 --batch-size 32
    done
    check_equal "$tmp/cran" "$data/queries.tsv" 2 or 1000 --batch-size 64
    echo "PASS: Cranfield, 2 ISNs: and, or, and-or (k 10) and or (k 1000) equal the reference"
    ;;
  slow)
    synthetic_index 2 "$tmp/idx"
    head -60 "$tmp/idx/queries.test.tsv" > "$tmp/q.tsv"
    start=$(date +%s)
    cluster --index "$tmp/idx" --queries "$tmp/q.tsv" --isns 2 --mode or --k 10 --run "$tmp/run.txt" \
      --metrics "$tmp/m.json" --batch-size 20 --deadline-ms 150 --inject-delay-ms 600 \
      --inject-delay-rank 2 > "$tmp/out.txt" 2>&1 || { cat "$tmp/out.txt"; fail "exit $?"; }
    took=$(( $(date +%s) - start ))
    partial=$(metric "$tmp/m.json" 'm["queries"]["partial"]')
    run=$(metric "$tmp/m.json" 'm["queries"]["run"]')
    missed=$(metric "$tmp/m.json" 'm["isn"][1]["batches_missed"]')
    [ "$partial" -gt 0 ] || fail "no partial answers from a slow ISN"
    [ "$run" = 60 ] || fail "answered $run of 60 queries"
    [ "$missed" -gt 0 ] || fail "the slow ISN missed no batch"
    [ "$took" -lt 40 ] || fail "took $took s"
    grep -q "missed its deadline" "$tmp/out.txt" || fail "no deadline message"
    echo "PASS: slow ISN: $partial of $run answers partial, $missed batches missed, ${took}s"
    ;;
  fault)
    synthetic_index 2 "$tmp/idx"
    # GPUSEARCH_TEST_ENGINE=gpu (the GPU host's run) injects the fault into the GPU engine: a
    # real failing CUDA call; elsewhere the CPU engine is wrapped in a fault injector.
    check_equal "$tmp/idx" "$tmp/idx/queries.test.tsv" 2 and-or 10 --batch-size 16 \
      --inject-engine-fault-at-batch 3 --engine "${GPUSEARCH_TEST_ENGINE:-cpu}"
    m="$tmp/m-2-and-or-10.json"
    [ "$(metric "$m" 'm["isn"][0]["stats"]["fallback_active"]')" = True ] || fail "no fallback"
    [ "$(metric "$m" 'm["isn"][0]["stats"]["batches_on_fallback"] > 0')" = True ] || fail "no batch on fallback"
    grep -Eq "injected (GPU|engine) fault" "$tmp/out-2-and-or-10.txt" || fail "fallback not reported"
    echo "PASS: injected engine fault: CPU fallback, every answer equal to the reference"
    ;;
  malformed)
    synthetic_index 1 "$tmp/idx"
    # Line 6: random bytes before the tab as a query id (issue 14): malformed, not in the run.
    { printf 'q1\tsome query words\nno tab on this line\n\tempty id\nq2\t   \nq3\tmore words here\n'
      printf '\x8f\xfe\x01\x1b[0m \xc3\tsome query words\n'; } > "$tmp/q.tsv"
    cluster --index "$tmp/idx" --queries "$tmp/q.tsv" --isns 1 --run "$tmp/run.txt" \
      --metrics "$tmp/m.json" > "$tmp/out.txt" 2>&1 || { cat "$tmp/out.txt"; fail "exit $?"; }
    [ "$(metric "$tmp/m.json" 'm["queries"]["skipped"]')" = 4 ] || fail "expected 4 skipped"
    [ "$(metric "$tmp/m.json" 'm["queries"]["run"]')" = 2 ] || fail "expected 2 run"
    grep -q "malformed line" "$tmp/out.txt" || fail "malformed lines not reported"
    grep -q "q.tsv:6: .*not valid UTF-8" "$tmp/out.txt" || { cat "$tmp/out.txt"; fail "bad id not reported with file and line"; }
    # The run file is valid TREC: six printable fields per line, ids q1 and q3 only (if any hits).
    LC_ALL=C awk 'NF != 6 || $2 != "Q0" || /[^ -~]/ { bad = 1 } END { exit bad }' "$tmp/run.txt" ||
      fail "run file is not valid TREC"
    ! cut -d' ' -f1 "$tmp/run.txt" | grep -qvx 'q[13]' || fail "unexpected query ids in the run"
    cluster --index "$tmp/idx" --queries - --isns 1 --run "$tmp/run2.txt" --metrics "$tmp/m2.json" \
      < "$tmp/q.tsv" > "$tmp/out2.txt" 2>&1 || { cat "$tmp/out2.txt"; fail "stdin exit $?"; }
    [ "$(metric "$tmp/m2.json" 'm["queries"]["skipped"]')" = 4 ] || fail "stdin: expected 4 skipped"
    cmp -s <(sort "$tmp/run.txt") <(sort "$tmp/run2.txt") || fail "stdin run differs from file run"
    echo "PASS: malformed query lines reported and counted (file and standard input)"
    ;;
  mismatch)
    synthetic_index 2 "$tmp/idx"
    set +e
    timeout -k 10 60 mpirun --oversubscribe --bind-to none -n 1 "$build/bin/gpusearch-aggregator" \
      --index "$tmp/idx" --queries "$tmp/idx/queries.test.tsv" --run "$tmp/run.txt" -q : \
      -n 3 "$build/bin/gpusearch-isn" --index "$tmp/idx" > "$tmp/out.txt" 2>&1
    rc=$?
    set -e
    [ "$rc" != 0 ] && [ "$rc" != 124 ] || { cat "$tmp/out.txt"; fail "exit code $rc"; }
    grep -q "has 2 shard(s) but the job has 3 ISN(s)" "$tmp/out.txt" || { cat "$tmp/out.txt"; fail "no clear error"; }
    "$root/launch/cluster.sh" --index "$tmp/idx" --queries "$tmp/idx/queries.test.tsv" --isns 3 \
      --run "$tmp/run.txt" > "$tmp/out2.txt" 2>&1 && fail "cluster.sh accepted 3 ISNs for 2 shards"
    grep -q "one ISN serves one shard" "$tmp/out2.txt" || fail "cluster.sh: no clear error"
    echo "PASS: ISN count != shard count is a clear error (exit $rc)"
    ;;
  scheduler)
    "$gs" -q index --synthetic "docs=4000,seed=11,train_queries=80,test_queries=150,mean_length=150" \
      --shards 2 --out "$tmp/idx" >/dev/null
    for sched in queues lbd; do
      # Several batches in flight from the aggregator: the ISN pipelines them through its
      # scheduler (up to --scheduler-batches-in-flight, 4 by default).
      check_equal "$tmp/idx" "$tmp/idx/queries.test.tsv" 2 and-or 10 --batch-size 16 \
        --max-in-flight 4 --admission window --scheduler $sched --engine "${GPUSEARCH_TEST_ENGINE:-reference}" \
        --lbd-blocks 10
      m="$tmp/m-2-and-or-10.json"
      s="m['isn'][i]['stats']['scheduler']"
      jobs=$(metric "$m" "sum(p['jobs'] for i in range(2) for p in $s['processors'].values())")
      want=$(metric "$m" "sum(m['isn'][i]['stats']['queries'] for i in range(2))")  # all sent
      [ "$jobs" = "$want" ] || fail "$sched: $jobs jobs scheduled, expected $want"
      [ "$(metric "$m" "m['isn'][0]['stats']['scheduler']['policy']")" = "$sched" ] || fail "$sched: policy not reported"
      jobs_cpu=$(metric "$m" "sum($s['processors']['cpu']['jobs'] for i in range(2))")
      jobs_gpu=$(metric "$m" "sum($s['processors']['gpu']['jobs'] for i in range(2))")
      peak=$(metric "$m" "max($s['peak_batches_in_flight'] for i in range(2))")
      echo "$sched: $jobs_cpu jobs on the CPU engine, $jobs_gpu on the other; at most $peak batches in flight in an ISN"
      if [ $sched = queues ]; then
        samples=$(metric "$m" "m['isn'][0]['stats']['scheduler']['predictor']['cpu']['samples']")
        [ "$samples" -ge 40 ] || fail "queues: predictor trained on $samples queries"
        echo "queues: predictor error (held out) $(metric "$m" "[round(m['isn'][0]['stats']['scheduler']['predictor'][p]['mean_relative_error_held_out'], 3) for p in ('cpu', 'gpu')]")"
        online=$(metric "$m" "m['isn'][0]['stats']['scheduler']['predictor']['online']")
        echo "queues: online refit of the CPU model: $online"
        # Trained at start-up on the run's mode and k (cluster.sh passes them to the ISNs), not
        # in the first batch, which would be charged for it.
        [ "$(metric "$m" "all(m['isn'][i]['hello']['prepare_seconds'] > 0 for i in range(2))")" = True ] ||
          fail "queues: the predictor was not trained before the hello (prepare_seconds $(metric "$m" "[m['isn'][i]['hello'].get('prepare_seconds') for i in range(2)]"))"
      fi
      [ "$jobs_cpu" -gt 0 ] && [ "$jobs_gpu" -gt 0 ] || fail "$sched: one processor did nothing"
    done
    echo "PASS: --scheduler queues and lbd: every answer equal to the reference, both processors used"
    ;;
  thresholds)
    synthetic_index 4 "$tmp/idx"
    head -120 "$tmp/idx/queries.test.tsv" > "$tmp/q.tsv"
    head -40 "$tmp/idx/queries.test.tsv" > "$tmp/q40.tsv"
    for mode in and or and-or; do
      for k in 10 1000; do
        if [ "$k" = 10 ]; then q=$tmp/q.tsv; b=16; else q=$tmp/q40.tsv; b=8; fi
        check_equal "$tmp/idx" "$q" 4 "$mode" "$k" --batch-size "$b" --max-in-flight 3 \
          --engine cpu --share-thresholds on
        [ "$(metric "$tmp/m-4-$mode-$k.json" 'all(i["stats"]["share_thresholds"]["active"] and
            i["stats"]["share_thresholds"]["sharers"] == 4 and
            i["stats"]["share_thresholds"]["collection_seeds"] and
            i["stats"]["share_thresholds"]["unions"] and
            i["stats"]["share_thresholds"]["batches_shared"] == i["stats"]["batches"] > 0
            for i in m["isn"])')" = True ] || fail "$mode k $k: not every ISN shared every batch"
        cp "$tmp/m-4-$mode-$k.json" "$tmp/on-$mode-$k.json"
      done
    done
    # Each shard seeding from its own K-th impacts instead of the node's combined ones: the
    # same answers.
    check_equal "$tmp/idx" "$tmp/q.tsv" 4 or 10 --batch-size 16 --max-in-flight 3 \
      --engine cpu --share-thresholds on --share-kth-seeds off
    [ "$(metric "$tmp/m-4-or-10.json" 'not any(i["stats"]["share_thresholds"]["collection_seeds"] for i in m["isn"])')" = True ] ||
      fail "--share-kth-seeds off still seeded from the node's tables"
    # Each ISN on its own slice of the CPUs (--pin-cores auto): the same answers; every ISN
    # says where it ran, and together they cover the CPUs this job may use.
    check_equal "$tmp/idx" "$tmp/q.tsv" 4 and-or 10 --batch-size 16 --max-in-flight 3 \
      --engine cpu --share-thresholds on --pin-cores auto
    [ "$(metric "$tmp/m-4-and-or-10.json" '(all(i["stats"]["cpu_set"] != "any" for i in m["isn"]) and
        sorted(set(c for i in m["isn"] for part in i["stats"]["cpu_set"].split(",")
                   for c in range(int(part.split("-")[0]), int(part.split("-")[-1]) + 1)))
        == sorted(os.sched_getaffinity(0)))')" = True ] ||
      fail "--pin-cores auto: the ISNs' CPU sets do not cover this machine's CPUs"
    grep -q "node-local ISN 3 of 4 runs on CPUs" "$tmp/out-4-and-or-10.txt" ||
      { cat "$tmp/out-4-and-or-10.txt"; fail "--pin-cores auto: no message naming the CPUs"; }
    # Batches queued at the ISNs (window admission, a slow engine) join one engine call while
    # the ISNs share (--coalesce-batches): each query keeps its own batch's slots. The same
    # answers, and every batch still shared.
    check_equal "$tmp/idx" "$tmp/q.tsv" 4 and-or 10 --batch-size 6 --max-in-flight 8 \
      --admission window --inject-delay-ms 5 --engine cpu --share-thresholds on
    [ "$(metric "$tmp/m-4-and-or-10.json" '(sum(i["stats"]["coalesce"]["joint_calls"] for i in m["isn"]) > 0 and
        all(i["stats"]["share_thresholds"]["batches_shared"] == i["stats"]["batches"] > 0 for i in m["isn"]))')" = True ] ||
      fail "sharing ISNs with queued batches: no joint call, or a batch not shared"
    # Where each ISN's CPU went: the run's process, MPI thread and engine thread.
    [ "$(metric "$tmp/m-4-and-or-10.json" '(all(c["process"] > 0 and c["engine_thread"] > 0 and
        c["mpi_thread"] + c["engine_thread"] <= c["process"] + 0.05
        for c in (i["stats"]["cpu_seconds"] for i in m["isn"])) and m["cpu_seconds"]["process"] > 0)')" = True ] ||
      fail "the ISNs' or the aggregator's cpu_seconds are missing or do not add up"
    # The batch's queries in batch order, one at a time (--share-in-order on): the same answers.
    check_equal "$tmp/idx" "$tmp/q.tsv" 4 and-or 10 --batch-size 16 --max-in-flight 3 \
      --engine cpu --share-thresholds on --share-in-order on
    # The slots without their unions of published scores (as before session 32): the same
    # answers.
    check_equal "$tmp/idx" "$tmp/q.tsv" 4 and-or 10 --batch-size 16 --max-in-flight 3 \
      --engine cpu --share-thresholds on --share-unions off
    [ "$(metric "$tmp/m-4-and-or-10.json" 'not any(i["stats"]["share_thresholds"]["unions"] for i in m["isn"])')" = True ] ||
      fail "--share-unions off still shared the unions"
    # The work saved: the same runs without sharing score more documents and decode more
    # postings (summed over the ISNs), and give the same answers.
    for mode in or and-or; do
      check_equal "$tmp/idx" "$tmp/q.tsv" 4 "$mode" 10 --batch-size 16 --max-in-flight 3 \
        --engine cpu --share-thresholds off
      [ "$(metric "$tmp/m-4-$mode-10.json" 'not any(i["stats"]["share_thresholds"]["active"] for i in m["isn"])')" = True ] ||
        fail "$mode: --share-thresholds off still shared"
      on_docs=$(metric "$tmp/on-$mode-10.json" 'm["counters"]["docs_scored"]')
      off_docs=$(metric "$tmp/m-4-$mode-10.json" 'm["counters"]["docs_scored"]')
      on_post=$(metric "$tmp/on-$mode-10.json" 'm["counters"]["postings_decoded"]')
      off_post=$(metric "$tmp/m-4-$mode-10.json" 'm["counters"]["postings_decoded"]')
      [ "$on_docs" -lt "$off_docs" ] || fail "$mode: sharing scored $on_docs documents, not fewer than $off_docs"
      [ "$on_post" -le "$off_post" ] || fail "$mode: sharing decoded $on_post postings, more than $off_post"
      echo "$mode k 10: documents scored $off_docs -> $on_docs, postings decoded $off_post -> $on_post"
    done
    synthetic_index 1 "$tmp/idx1"
    cluster --index "$tmp/idx1" --queries "$tmp/q40.tsv" --isns 1 --run "$tmp/run1.txt" \
      --share-thresholds on > "$tmp/out1.txt" 2>&1 || { cat "$tmp/out1.txt"; fail "1-ISN run exited $?"; }
    grep -q "share-thresholds on: not available: this ISN is alone on its node" "$tmp/out1.txt" ||
      { cat "$tmp/out1.txt"; fail "no message for one ISN alone"; }
    echo "PASS: 4 ISNs sharing thresholds: and, or, and-or at k 10 and 1000 equal the reference, less work"
    ;;
  multigpu)
    # The multi-GPU runs' script end to end without a GPU (--engine cpu: G = 1 only), on tiny
    # indexes: the plumbing a device call must not find broken.
    mg=$tmp/mg
    "$root/launch/multi-gpu-runs.sh" --out "$mg" --engine cpu --gpus "1 2" --docs 6000 \
      --docs-per-gpu 4000 --batches 64 --ks "10 100" --rates "0 4000" --queries 200 \
      > "$tmp/mg.txt" 2>&1 || { cat "$tmp/mg.txt"; fail "multi-gpu-runs.sh exited $?"; }
    [ "$(metric "$mg/multi-gpu.json" '(m["exact"] and len(m["rows"]) == 7 and
        sorted(set(r["phase"] for r in m["rows"])) == ["per-isn", "per-node", "weak"] and
        all(r["queries_per_second"] > 0 and r["p99_ms"] > 0 for r in m["rows"]) and
        m["weak_scaling"][0]["weak_scaling_efficiency"] == 1.0 and "gpus" in m["machine"])')" = True ] ||
      { cat "$tmp/mg.txt"; fail "multi-gpu.json: rows missing, not exact, or fields absent"; }
    # Each row's ISN compute per batch and busy share; weak scaling by compute too.
    [ "$(metric "$mg/multi-gpu.json" '(all(r["isn_compute_ms"] > 0 and 0 < r["isn_busy"] <= 1 and r["admission"] == ("on arrival" if r["rate"] else "just-in-time") and r["cluster_flags"] == "" for r in m["rows"]) and
        m["weak_scaling"][0]["weak_scaling_efficiency_compute"] == 1.0)')" = True ] ||
      fail "multi-gpu.json: isn_compute_ms, isn_busy, admission or the compute efficiency: $(metric "$mg/multi-gpu.json" '[(r["name"], r.get("isn_compute_ms"), r.get("isn_busy"), r.get("admission")) for r in m["rows"]]')"
    grep -q "| per-node-horizontal-d6000-g1-r4000 | 1 x 1 |" "$mg/multi-gpu.md" ||
      fail "multi-gpu.md: no per-node row at 4000 arrivals/s"
    "$root/launch/multi-gpu-runs.sh" --out "$mg" --engine cpu --gpus "1 2" --docs 6000 \
      --docs-per-gpu 4000 --batches 64 --ks "10 100" --rates "0 4000" --queries 200 \
      > "$tmp/mg2.txt" 2>&1 || { cat "$tmp/mg2.txt"; fail "the second call exited $?"; }
    [ "$(grep -c 'done before' "$tmp/mg2.txt")" = 7 ] && ! grep -q "ISN(s) x" "$tmp/mg2.txt" ||
      { cat "$tmp/mg2.txt"; fail "the second call ran rows again instead of resuming"; }
    # --summarize-only keeps the record of the machine that ran the rows.
    echo "gpus 5" >> "$mg/machine.txt"
    "$root/launch/multi-gpu-runs.sh" --out "$mg" --engine cpu --summarize-only > "$tmp/mgs.txt" 2>&1 ||
      { cat "$tmp/mgs.txt"; fail "--summarize-only exited $?"; }
    grep -qx "gpus 5" "$mg/machine.txt" || fail "--summarize-only rewrote machine.txt"
    # --cluster-flags reach every row's cluster: window admission, recorded in the row.
    "$root/launch/multi-gpu-runs.sh" --out "$tmp/mgw" --engine cpu --gpus 1 --docs 6000 \
      --phases per-isn --batches 64 --ks 10 --queries 200 --index-root "$mg/indexes" \
      --cluster-flags "--admission window --max-depth 4" > "$tmp/mgw.txt" 2>&1 ||
      { cat "$tmp/mgw.txt"; fail "multi-gpu-runs.sh --cluster-flags exited $?"; }
    [ "$(metric "$tmp/mgw/multi-gpu.json" '(m["exact"] and len(m["rows"]) == 1 and m["rows"][0]["admission"] == "window" and m["rows"][0]["cluster_flags"] == "--admission window --max-depth 4")')" = True ] ||
      { cat "$tmp/mgw.txt"; fail "--cluster-flags: $(metric "$tmp/mgw/multi-gpu.json" 'm["rows"]')"; }
    grep -q "cluster flags: '--admission window --max-depth 4'" "$tmp/mgw/multi-gpu.md" ||
      fail "multi-gpu.md does not name the cluster flags"
    "$root/launch/multi-gpu-runs.sh" --out "$mg" --phases sideways > "$tmp/mg3.txt" 2>&1 &&
      fail "an unknown phase was accepted"
    grep -q "unknown phase 'sideways'" "$tmp/mg3.txt" || { cat "$tmp/mg3.txt"; fail "no error naming the phase"; }
    "$root/launch/multi-gpu-runs.sh" --out "$mg" --splits diagonal > "$tmp/mg4.txt" 2>&1 &&
      fail "an unknown split was accepted"
    grep -q "unknown split 'diagonal'" "$tmp/mg4.txt" || { cat "$tmp/mg4.txt"; fail "no error naming the split"; }
    echo "PASS: multi-gpu-runs.sh with the CPU engine: 7 rows exact, summary written, resumed"
    ;;
  badflags)
    synthetic_index 1 "$tmp/idx"
    for flags in "--scheduler fifo" "--gpus-per-isn 0" "--scheduler queues --scheduler-train $tmp/none.tsv" \
        "--share-thresholds maybe" "--scheduler queues --scheduler-routing fastest" \
        "--pin-cores 3-1" "--gpu-split diagonal"; do
      set +e
      # shellcheck disable=SC2086
      timeout -k 10 60 "$root/launch/cluster.sh" --index "$tmp/idx" --queries "$tmp/idx/queries.test.tsv" \
        --isns 1 --run "$tmp/run.txt" $flags > "$tmp/out.txt" 2>&1
      rc=$?
      set -e
      [ "$rc" != 0 ] && [ "$rc" != 124 ] || { cat "$tmp/out.txt"; fail "$flags: exit code $rc"; }
      grep -q "MPI_ABORT" "$tmp/out.txt" && { cat "$tmp/out.txt"; fail "$flags: the job was aborted"; }
      case "$flags" in
        *fifo*) want="unknown scheduler 'fifo'" ;;
        *routing*) want="unknown routing 'fastest'" ;;
        *gpus-per-isn*) want="--gpus-per-isn 0" ;;
        *share-thresholds*) want="--share-thresholds" ;;
        *pin-cores*) want="--pin-cores: '3-1': the range 3-1 runs backwards" ;;
        *gpu-split*) want="--gpu-split" ;;
        *) want="needs training queries" ;;
      esac
      grep -qF -- "$want" "$tmp/out.txt" || { cat "$tmp/out.txt"; fail "$flags: no clear error ($want)"; }
      echo "$flags: clear error, exit $rc"
    done
    echo "PASS: bad ISN flags are clear errors, not job aborts"
    ;;
  eager)
    # The container case: no CMA, so above the eager limit a message moves only while its sender
    # makes MPI progress (common/wire/shared_memory_eager.hpp).
    export OMPI_MCA_btl_vader_single_copy_mechanism=none
    probe="$build/bin/bench_mpi_sender_progress"
    for e in 1048576 0; do  # the sender sleeps 2 s after posting 256 KiB
      mpirun --oversubscribe -np 2 "$probe" --sleep-us 2000000 --reps 1 --shm-eager-bytes "$e" \
        > "$tmp/probe-$e.txt" 2>&1 || { cat "$tmp/probe-$e.txt"; fail "probe --shm-eager-bytes $e: exit $?"; }
      tail -1 "$tmp/probe-$e.txt" > "$tmp/probe-$e.json"
      echo "--shm-eager-bytes $e: $(metric "$tmp/probe-$e.json" '"received after %.1f ms, eager limit %s" % (m["median_received_us"] / 1000, m["shared_memory"]["eager_limit"])')"
    done
    metric "$tmp/probe-1048576.json" 'not m["waits_for_sender"] and m["shared_memory"]["eager_limit"] == 1048576 and m["shared_memory"]["single_copy_mechanism"] == "none"' |
      grep -qx True || fail "with the eager limit the message waited for its sender: $(cat "$tmp/probe-1048576.json")"
    metric "$tmp/probe-0.json" 'm["waits_for_sender"] and m["shared_memory"]["eager_limit"] == 4096 and m["shared_memory"]["set_by_gpusearch"] == []' |
      grep -qx True || fail "Open MPI's own 4 KiB limit did not make the message wait: $(cat "$tmp/probe-0.json")"
    # Clusters (answers of 64 queries, k 100: above 4 KiB): exact, and every rank reports the
    # limit in effect: the default, Open MPI's own with 0, the user's own OMPI_MCA value.
    synthetic_index 2 "$tmp/idx"
    for setting in default 0 user; do
      flags=(); envs=(); want=1048576; ours="['btl_vader_eager_limit', 'btl_vader_segment_size']"
      [ "$setting" = 0 ] && { flags=(--shm-eager-bytes 0); want=4096; ours="[]"; }
      [ "$setting" = user ] && { envs=(OMPI_MCA_btl_vader_eager_limit=65536); want=65536; ours="[]"; }
      env "${envs[@]}" "$root/launch/cluster.sh" -q --index "$tmp/idx" --queries "$tmp/idx/queries.test.tsv" \
        --isns 2 --mode and-or --k 100 --batch-size 64 --run "$tmp/run-$setting.txt" \
        --metrics "$tmp/m-$setting.json" "${flags[@]}" > "$tmp/out-$setting.txt" 2>&1 ||
        { cat "$tmp/out-$setting.txt"; fail "$setting: exit $?"; }
      [ "$setting" = default ] && "$gs" -q search --engine reference --index "$tmp/idx" \
        --queries "$tmp/idx/queries.test.tsv" --mode and-or --k 100 --run "$tmp/ref.txt" >/dev/null
      "$gs" compare-runs "$tmp/ref.txt" "$tmp/run-$setting.txt" || fail "$setting differs from the reference"
      metric "$tmp/m-$setting.json" "all(s['eager_limit'] == $want and s['set_by_gpusearch'] == $ours for s in [m['wire']['shared_memory']] + [i['stats']['shared_memory'] for i in m['isn']])" |
        grep -qx True || fail "$setting: $(metric "$tmp/m-$setting.json" "[m['wire']['shared_memory']] + [i['stats']['shared_memory'] for i in m['isn']]")"
      echo "$setting: exact, eager limit $want on every rank, about $(metric "$tmp/m-$setting.json" 'm["wire"]["bytes_received"] // m["batches"]["count"] // 2') bytes an answer"
    done
    # A value Open MPI cannot take is a clear error.
    for bad in 100 17000000 lots; do
      set +e
      timeout -k 10 60 "$root/launch/cluster.sh" --index "$tmp/idx" --queries "$tmp/idx/queries.test.tsv" \
        --isns 2 --run "$tmp/run-bad.txt" --shm-eager-bytes "$bad" > "$tmp/out-bad.txt" 2>&1
      rc=$?
      set -e
      # 2: the flag error's code, through the abort marker (mpirun --enable-recovery exits 0).
      [ "$rc" = 2 ] || { cat "$tmp/out-bad.txt"; fail "--shm-eager-bytes $bad: exit $rc, not 2"; }
      grep -qF -- "--shm-eager-bytes" "$tmp/out-bad.txt" || { cat "$tmp/out-bad.txt"; fail "--shm-eager-bytes $bad: no clear error"; }
    done
    echo "PASS: answers eager over shared memory without CMA: no wait for the sender, exact, the limit reported; bad values refused"
    ;;
  sharedshards)
    # A node's shards in one process (their slots on the heap or in shared memory) and in
    # processes of their own (bench_shared_shards, the in-process twin of four ISNs; no MPI):
    # every config's merged answers equal the whole shard's, each counted.
    "$gs" -q index --synthetic "docs=4000,seed=11,train_queries=5,test_queries=300,mean_length=150" \
      --out "$tmp/whole" >/dev/null
    "$gs" -q partition --index "$tmp/whole" --out "$tmp/s4" --shards 4 --split round-robin >/dev/null
    ss() { "$build/bin/bench_shared_shards" --whole "$tmp/whole" --queries "$tmp/whole/queries.test.tsv" \
      --batch 16 --threads 4 "$@"; }
    ss --sharded "$tmp/s4" --configs whole,lockstep,at-once-shm,processes,processes-lockstep --reps 2 \
      --out "$tmp/ss.json" > "$tmp/ss.txt" 2>&1 || { cat "$tmp/ss.txt"; fail "bench_shared_shards exited $?"; }
    cat "$tmp/ss.txt"
    [ "$(metric "$tmp/ss.json" '(sorted(set(r["config"] for r in m["runs"])) == ["at-once-shm", "lockstep", "processes", "processes-lockstep", "whole"]
        and len(m["runs"]) == 10 and m["queries"] > 250
        and all(r["answers_differ"] == 0 and r["docs_scored"] > 0 and r["seconds"] > 0 for r in m["runs"]))')" = True ] ||
      fail "bench_shared_shards: $(metric "$tmp/ss.json" 'm["runs"]')"
    # Processes need shards to share: a one-shard index is refused, naming the flag.
    set +e
    ss --sharded "$tmp/whole" --configs processes > "$tmp/ss1.txt" 2>&1
    rc=$?
    set -e
    [ "$rc" = 1 ] && grep -q -- "--configs.*2 shards or more" "$tmp/ss1.txt" ||
      { cat "$tmp/ss1.txt"; fail "processes over one shard: exit $rc, no clear error"; }
    echo "PASS: the shards in processes of their own share slots through shared memory, exact; one shard refused"
    ;;
  overheadsummary)
    ob=$tmp/ob
    "$root/launch/bench-cluster-overhead.sh" --out "$ob" --build "$build" --engine cpu --docs 3000 \
      --queries 300 --batches 64 --isns 1 --reps 1 --variants adaptive --probe-reps 0 \
      --latency-reps 0 > "$tmp/ob.txt" 2>&1 || { cat "$tmp/ob.txt"; fail "bench-cluster-overhead.sh exited $?"; }
    grep -qE "^adaptive +1 +64 .* equal$" "$tmp/ob.txt" || { cat "$tmp/ob.txt"; fail "no exact row in the table"; }
    [ "$(metric "$ob/cluster-overhead.json" '(m["table"][0]["answers_equal"] is True and m["config"]["index_docs"] == 3000 and m["machine"]["cores"] > 0 and m["config"]["order"] == "rotate")')" = True ] ||
      fail "cluster-overhead.json: $(metric "$ob/cluster-overhead.json" '(m["table"], m["config"], m["machine"])')"
    # Two variants, two reps: each runs first in turn (--order rotate, the default); a bad
    # --order is refused.
    "$root/launch/bench-cluster-overhead.sh" --out "$tmp/ob2" --build "$build" --engine cpu \
      --index "$ob/index" --queries 120 --batches 64 --isns 1 --reps 2 --variants "adaptive spin" \
      --probe-reps 0 --latency-reps 0 > "$tmp/ob2.txt" 2>&1 || { cat "$tmp/ob2.txt"; fail "two variants, two reps: exit $?"; }
    [ "$(grep -oE "^ +(adaptive|spin) +1 ISN\(s\) batch +64 rep [12]" "$tmp/ob2.txt" | awk '{print $1 $NF}' | tr '\n' ' ')" = "adaptive1 spin1 spin2 adaptive2 " ] ||
      { cat "$tmp/ob2.txt"; fail "--order rotate: the variants did not take turns running first"; }
    set +e
    "$root/launch/bench-cluster-overhead.sh" --out "$tmp/ob3" --order sideways > "$tmp/ob3.txt" 2>&1
    rc=$?
    set -e
    [ "$rc" = 2 ] && grep -q -- "--order sideways" "$tmp/ob3.txt" || { cat "$tmp/ob3.txt"; fail "--order sideways: exit $rc"; }
    # The run's legs, one line a run, each p50 leg a number (launch/cluster-legs.py).
    python3 "$root/launch/cluster-legs.py" "$ob/runs" > "$tmp/legs.txt" 2>&1 || { cat "$tmp/legs.txt"; fail "cluster-legs.py exited $?"; }
    cat "$tmp/legs.txt"
    grep -qE "^adaptive-isns1-batch64-rep1 +[0-9]+ +[0-9.]+ +[0-9.]+ +[0-9.]+ " "$tmp/legs.txt" || fail "cluster-legs.py: no line for the run"
    # What a device call's tarball brings back: the runs' JSON, no answer checks, no index.
    rm -f "$ob"/runs/*.answers
    rm -rf "$ob/index"
    metric "$ob/cluster-overhead.json" 'm.update(machine={"cpu": "the device", "cores": 16}) or json.dump(m, open(sys.argv[1], "w"))' > /dev/null
    "$root/launch/bench-cluster-overhead.sh" --out "$ob" --build "$build" --engine cpu --queries 300 \
      --batches 64 --isns 1 --variants adaptive --summarize-only > "$tmp/obs.txt" 2>&1 ||
      { cat "$tmp/obs.txt"; fail "--summarize-only without answer checks or index exited $?"; }
    grep -qE "^adaptive +1 +64 .* unchecked$" "$tmp/obs.txt" || { cat "$tmp/obs.txt"; fail "the row does not say unchecked"; }
    [ "$(metric "$ob/cluster-overhead.json" '(m["table"][0]["answers_equal"] is None and m["config"]["index_docs"] is None and m["machine"] == {"cpu": "the device", "cores": 16})')" = True ] ||
      fail "re-summary: $(metric "$ob/cluster-overhead.json" '(m["table"][0]["answers_equal"], m["config"], m["machine"])')"
    echo "PASS: bench-cluster-overhead.sh exact on a tiny index; --summarize-only over the runs alone says unchecked, keeps the machine"
    ;;
  scalingpairs)
    mkdir -p "$tmp/call1" "$tmp/call2"
    made() {  # made FOLDER ISNS REP QPS [gz]
      local f="$tmp/$1/adaptive-isns$2-batch1024-rep$3.json"
      echo "{\"queries_per_second\": $4}" > "$f"
      [ "${5:-}" = gz ] && gzip "$f"
      return 0
    }
    made call1 1 1 100; made call1 4 1 110; made call1 1 2 200; made call1 4 2 180
    made call1 1 3 100 gz; made call1 4 3 90 gz; made call1 1 4 150  # rep 4: no 4-ISN run
    made call2 1 1 100; made call2 4 1 120
    python3 "$root/launch/summarize-isn-scaling.py" "$tmp/call1" > "$tmp/one.txt"
    cat "$tmp/one.txt"
    # Ratios 1.1, 0.9, 0.9: median 0.900, geometric mean 0.962, range 0.900-1.100.
    grep -qE "^adaptive +1024 +3 .* 0\.900 +0\.962 +0\.900-1\.100$" "$tmp/one.txt" || fail "one call's pairs"
    python3 "$root/launch/summarize-isn-scaling.py" "$tmp/call1" "$tmp/call2" > "$tmp/two.txt"
    cat "$tmp/two.txt"
    # Pooled: 1.1, 0.9, 0.9, 1.2: median 1.000.
    grep -qE "^adaptive +1024 +4 .* 1\.000 " "$tmp/two.txt" || fail "two calls pooled"
    set +e
    python3 "$root/launch/summarize-isn-scaling.py" "$tmp/none" > "$tmp/bad.txt" 2>&1
    rc=$?
    set -e
    [ "$rc" != 0 ] && grep -qF "$tmp/none: not a folder" "$tmp/bad.txt" || fail "a bad folder: exit $rc, $(cat "$tmp/bad.txt")"
    echo "PASS: summarize-isn-scaling pairs reps, leaves out a rep without its pair, pools calls"
    ;;
  share)
    synthetic_index 4 "$tmp/idx"
    check_equal "$tmp/idx" "$tmp/idx/queries.test.tsv" 4 and-or 10 --batch-size 32 --engine gpu
    out="$tmp/out-4-and-or-10.txt"
    # The ISNs say which engine they run: the GPU's where the node has one.
    if grep -q "engine gpu, GPU ordinal" "$out"; then
      grep -q "share the GPUs round-robin" "$out" || [ "$(nvidia-smi -L | wc -l)" -ge 4 ] ||
        fail "no sharing message"
      echo "PASS: 4 ISNs sharing the node's GPU(s): every answer equal to the reference"
    else
      [ "$(grep -c "running the CPU engine instead" "$out")" = 4 ] || { cat "$out"; fail "no fallback message from each ISN"; }
      echo "PASS: 4 ISNs asking for a GPU on a node without one: CPU engine, clear message, exact"
    fi
    ;;
  openloop)
    synthetic_index 2 "$tmp/idx"
    check_equal "$tmp/idx" "$tmp/idx/queries.test.tsv" 2 and-or 10 --qps 300 --batch-size 16 \
      --max-wait-us 5000
    m="$tmp/m-2-and-or-10.json"
    # 150 arrivals at 300/s cannot be answered in less than half a second.
    [ "$(metric "$m" 'm["seconds"] >= 0.45')" = True ] || fail "not paced: $(metric "$m" 'm["seconds"]') s"
    [ "$(metric "$m" 'm["batches"]["size"]["mean"] < 16')" = True ] || fail "batches not cut by wait time"
    echo "PASS: open-loop replay at 300 queries/s: paced, batches cut by wait time, exact"
    ;;
  rpc)
    synthetic_index 2 "$tmp/idx"
    q=$tmp/idx/queries.test.tsv
    # The front end's loop spins (--rpc-poll) pinned to the first CPU (--rpc-thread, with the
    # merge thread), the load generator's polls adaptively on that CPU and the query's blocks
    # (the default, as in the other serving cases): the answers stay the replay's.
    cpu0=$(python3 -c 'import os; print(min(os.sched_getaffinity(0)))')
    serve --index "$tmp/idx" --isns 2 --mode and-or --k 10 --run "$tmp/rpc-run.txt" \
      --metrics "$tmp/rpc-m.json" --rpc-poll spin --rpc-thread "$cpu0"
    case "$addr" in 127.0.0.1:*) ;; *) fail "not bound to loopback: $addr" ;; esac
    grep -q -- "--rpc-poll spin, --rpc-thread $cpu0)" "$tmp/serve.txt" ||
      { cat "$tmp/serve.txt"; fail "front end not spinning on CPU $cpu0"; }
    "$gs" load --connect "$addr" --queries "$q" --qps 1 --rpc-thread 0,fifo 2> "$tmp/badthread.txt" &&
      fail "load accepted --rpc-thread 0,fifo"
    grep -q "rpc-thread: '0,fifo': expected CPU, rt or CPU,rt" "$tmp/badthread.txt" ||
      { cat "$tmp/badthread.txt"; fail "no clear error for --rpc-thread 0,fifo"; }
    "$gs" load --connect "$addr" --queries "$q" --qps 1 --rpc-poll busy 2> "$tmp/badpoll.txt" &&
      fail "load accepted --rpc-poll busy"
    grep -q "rpc-poll: unknown polling mode 'busy': expected block, adaptive or spin" "$tmp/badpoll.txt" ||
      { cat "$tmp/badpoll.txt"; fail "no clear error for --rpc-poll busy"; }
    # Open-loop load: all 150 queries at 300/s (Poisson), each answered once, no error.
    "$gs" load --connect "$addr" --queries "$q" --qps 300 --poisson --duration 10 --limit 150 \
      --rpc-poll adaptive --rpc-thread "$cpu0" --run "$tmp/load-run.txt" --metrics "$tmp/load.json" \
      > "$tmp/load.txt" 2>&1 ||
      { cat "$tmp/load.txt" "$tmp/serve.txt"; fail "load reported errors"; }
    [ "$(metric "$tmp/load.json" 'm["answered"]')" = 150 ] || fail "load: not every query answered"
    [ "$(metric "$tmp/load.json" 'sum(m["errors"].values())')" = 0 ] || fail "load: errors"
    # One query with its own mode and k.
    "$gs" query --connect "$addr" --mode or --k 3 --id one "$(head -1 "$q" | cut -f2)" > "$tmp/one.txt" ||
      fail "gpusearch query failed"
    grep -q "^query one: 3 hits" "$tmp/one.txt" || { cat "$tmp/one.txt"; fail "query: not 3 hits"; }
    # Shutdown needs the operator token; SIGTERM to cluster.sh sends it.
    echo wrong > "$tmp/bad-token"
    "$gs" query --connect "$addr" --shutdown --token-file "$tmp/bad-token" 2> "$tmp/refused.txt" &&
      fail "shutdown accepted without the token"
    grep -q "shutdown refused" "$tmp/refused.txt" || fail "no clear refusal"
    stop_serving
    [ "$(metric "$tmp/rpc-m.json" 'm["queries"]["run"]')" = 151 ] || fail "aggregator: expected 151 answered"
    [ "$(metric "$tmp/rpc-m.json" 'm["front_end"]["answered"]')" = 151 ] || fail "front end: expected 151 answered"
    # The same answers as the replay's, in the client's run and in the cluster's own.
    cluster --index "$tmp/idx" --queries "$q" --isns 2 --mode and-or --k 10 --run "$tmp/replay.txt" \
      > /dev/null 2>&1 || fail "replay failed"
    "$gs" compare-runs "$tmp/replay.txt" "$tmp/load-run.txt" || fail "RPC answers differ from the replay's"
    grep -v '^one ' "$tmp/rpc-run.txt" > "$tmp/rpc-load-only.txt"
    "$gs" compare-runs "$tmp/replay.txt" "$tmp/rpc-load-only.txt" || fail "cluster run differs from the replay's"
    echo "PASS: RPC front end answers equal the replay's; latency p50 $(metric "$tmp/load.json" \
      'round(m["latency_ms"]["p50"], 3)') ms, added by RPC p50 $(metric "$tmp/load.json" \
      'round(m["added_ms"]["p50"], 3)') ms; SIGTERM ended the run cleanly"
    ;;
  rpcdeadline)
    synthetic_index 2 "$tmp/idx"
    q=$tmp/idx/queries.test.tsv
    # ISN 2 sleeps 1 s before each batch; the cluster's own batch deadline is far (5 s).
    serve --index "$tmp/idx" --isns 2 --mode and-or --k 10 --run "$tmp/rpc-run.txt" \
      --metrics "$tmp/rpc-m.json" --inject-delay-ms 1000 --inject-delay-rank 2 --deadline-ms 5000
    text=$(head -1 "$q" | cut -f2)
    # A 100 ms deadline: answered at the deadline, flagged, long before the slow ISN's answer.
    "$gs" query --connect "$addr" --deadline-ms 100 --id late "$text" > "$tmp/late.txt" ||
      { cat "$tmp/late.txt"; fail "gpusearch query with a deadline failed"; }
    grep -q "^query late: 0 hits, DEADLINE EXCEEDED" "$tmp/late.txt" || { cat "$tmp/late.txt"; fail "no deadline-exceeded answer"; }
    late_ms=$(sed -n 's/.* hits, DEADLINE EXCEEDED (\([0-9.]*\) ms.*/\1/p' "$tmp/late.txt")
    python3 -c "import sys; t = float(sys.argv[1]); sys.exit(0 if 100 <= t < 900 else 1)" "$late_ms" ||
      fail "deadline answer after $late_ms ms, expected at 100 ms (the answer takes 1000 ms)"
    # Without a deadline the same query waits for the slow ISN and gets its hits.
    "$gs" query --connect "$addr" --id ontime "$text" > "$tmp/ontime.txt" || fail "gpusearch query failed"
    grep -Eq "^query ontime: [1-9][0-9]* hits" "$tmp/ontime.txt" && ! grep -Eq "DEADLINE|PARTIAL" "$tmp/ontime.txt" ||
      { cat "$tmp/ontime.txt"; fail "no full answer"; }
    stop_serving
    [ "$(metric "$tmp/rpc-m.json" 'm["front_end"]["deadline_exceeded"]')" = 1 ] || fail "front end: deadline_exceeded"
    [ "$(metric "$tmp/rpc-m.json" 'm["front_end"]["answered_after_deadline"]')" = 1 ] || fail "front end: the late answer"
    [ "$(metric "$tmp/rpc-m.json" 'm["front_end"]["answered"]')" = 1 ] || fail "front end: answered"
    [ "$(metric "$tmp/rpc-m.json" 'm["queries"]["run"]')" = 2 ] || fail "the cluster did not run both"
    grep -q "^late " "$tmp/rpc-run.txt" || fail "the late query is not in the cluster's run file"
    echo "PASS: a request past its 100 ms deadline answered after $late_ms ms (DEADLINE EXCEEDED), the slow answer not sent"
    ;;
  death)
    synthetic_index 2 "$tmp/idx"
    for i in 0 1 2 3 4 5; do sed "s/^/p$i-/" "$tmp/idx/queries.test.tsv"; done > "$tmp/q.tsv"  # 900
    start=$(date +%s)
    timeout -k 10 90 "$root/launch/cluster.sh" -q --index "$tmp/idx" --queries "$tmp/q.tsv" \
      --isns 2 --mode and-or --k 10 --run "$tmp/run.txt" --metrics "$tmp/m.json" --qps 300 \
      --deadline-ms 300 --isn-dead-after 3 --shutdown-grace-ms 1000 > "$tmp/out.txt" 2>&1 &
    job=$!
    victim=""
    for _ in $(seq 1 100); do
      victim=$(pgrep -f "gpusearch-isn --index $tmp/idx" | sort -n | tail -1 || true)
      [ -n "$victim" ] && [ -s "$tmp/run.txt" ] && break
      sleep 0.1
    done
    [ -n "$victim" ] || fail "no ISN process found"
    sleep 1
    kill -9 "$victim"
    set +e
    wait "$job"
    rc=$?
    set -e
    took=$(( $(date +%s) - start ))
    [ "$rc" = 3 ] || { cat "$tmp/out.txt"; fail "exit code $rc, expected 3 (job ended by the aggregator)"; }
    [ "$took" -lt 60 ] || fail "took $took s"
    grep -q "declared dead" "$tmp/out.txt" || { cat "$tmp/out.txt"; fail "dead ISN not reported"; }
    [ "$(metric "$tmp/m.json" 'm["dead_isns"]')" = "[2]" ] || fail "dead_isns: $(metric "$tmp/m.json" 'm["dead_isns"]')"
    [ "$(metric "$tmp/m.json" 'm["queries"]["run"]')" = 900 ] || fail "not every query answered"
    [ "$(metric "$tmp/m.json" 'm["queries"]["partial"] > 0')" = True ] || fail "no partial answers"
    [ "$(metric "$tmp/m.json" 'm["isn"][1]["stuck_at_shutdown"]')" = True ] || fail "dead ISN not reported at shutdown"
    # Every answered query once in the run file, ranks 1..n without repeats.
    awk '{ if (seen[$1 " " $4]++) bad = 1 } END { exit bad }' "$tmp/run.txt" || fail "an answer written twice"
    echo "PASS: ISN killed mid-run: declared dead, all 900 queries answered ($(metric "$tmp/m.json" \
      'm["queries"]["partial"]') partial), metrics written, job ended (exit $rc) in ${took}s"
    ;;
  stuck)
    synthetic_index 2 "$tmp/idx"
    head -40 "$tmp/idx/queries.test.tsv" > "$tmp/q.tsv"
    start=$(date +%s)
    set +e
    timeout -k 10 90 "$root/launch/cluster.sh" -q --index "$tmp/idx" --queries "$tmp/q.tsv" --isns 2 \
      --run "$tmp/run.txt" --metrics "$tmp/m.json" --batch-size 10 --deadline-ms 200 \
      --shutdown-grace-ms 1500 --inject-delay-ms 600000 --inject-delay-rank 2 > "$tmp/out.txt" 2>&1
    rc=$?
    set -e
    took=$(( $(date +%s) - start ))
    # cluster.sh exits 3 when the aggregator ended the job (its watchdog kills an mpirun that
    # crashes or hangs in its own teardown after MPI_Abort, as Open MPI 4.1.4's does at times).
    [ "$rc" = 3 ] || { cat "$tmp/out.txt"; fail "exit code $rc, expected 3"; }
    [ "$took" -lt 60 ] || fail "took $took s"
    [ "$(metric "$tmp/m.json" 'm["queries"]["run"]')" = 40 ] || fail "not every query answered"
    [ "$(metric "$tmp/m.json" 'm["isn"][1]["stuck_at_shutdown"]')" = True ] || fail "stuck ISN not reported"
    grep -q "did not answer the shutdown" "$tmp/out.txt" || fail "no shutdown message"
    echo "PASS: stuck ISN: all 40 queries answered (partially), metrics written, job ended in ${took}s (exit $rc)"
    ;;
  coalesce)
    # A slow engine (5 ms per batch) with 8 batches in flight: the ISN's queue backs up, and the
    # waiting batches join one engine call (--coalesce-batches). The answers must equal the
    # reference's and the run file the one-call-per-batch run's, byte for byte.
    synthetic_index 1 "$tmp/idx"
    "$gs" -q search --engine reference --index "$tmp/idx" --queries "$tmp/idx/queries.test.tsv" \
      --mode and-or --k 10 --run "$tmp/ref.txt" >/dev/null
    for c in 1 8; do
      cluster --index "$tmp/idx" --queries "$tmp/idx/queries.test.tsv" --isns 1 --mode and-or \
        --k 10 --batch-size 6 --max-in-flight 8 --admission window --inject-delay-ms 5 \
        --coalesce-batches "$c" \
        --run "$tmp/run-$c.txt" --metrics "$tmp/m-$c.json" > "$tmp/out-$c.txt" 2>&1 ||
        { cat "$tmp/out-$c.txt"; fail "coalesce $c: exit $?"; }
      "$gs" compare-runs "$tmp/ref.txt" "$tmp/run-$c.txt" || fail "coalesce $c differs from the reference"
    done
    cmp -s "$tmp/run-1.txt" "$tmp/run-8.txt" || fail "joined calls changed the run file"
    joint=$(metric "$tmp/m-8.json" 'm["isn"][0]["stats"]["coalesce"]["joint_calls"]')
    none=$(metric "$tmp/m-1.json" 'm["isn"][0]["stats"]["coalesce"]["joint_calls"]')
    [ "$joint" -gt 0 ] || fail "--coalesce-batches 8: no batches ever joined a call"
    [ "$none" = 0 ] || fail "--coalesce-batches 1: $none joint calls"
    echo "PASS: waiting batches joined $joint engine calls; answers equal the reference"
    ;;
  answerthread)
    # The ISN's MPI thread encodes the answers and decodes the batches that wait for the engine
    # (--answer-thread mpi, the default); the engine thread does both with --answer-thread
    # engine. A slow engine (5 ms a batch) with 8 batches in flight keeps batches waiting: the
    # MPI thread must have decoded some ahead, and both runs must equal the reference, byte for
    # byte alike. The hits' ids come from the id table's copy in huge pages with mpi (--id-table
    # huge-pages, the default) and from the shard's mapped files with engine.
    synthetic_index 2 "$tmp/idx"
    head -240 "$tmp/idx/queries.test.tsv" > "$tmp/q.tsv"
    "$gs" -q search --engine reference --index "$tmp/idx" --queries "$tmp/q.tsv" \
      --mode and-or --k 10 --run "$tmp/ref.txt" >/dev/null
    for a in mpi engine; do
      table=$([ "$a" = mpi ] && echo huge-pages || echo mapped)
      cluster --index "$tmp/idx" --queries "$tmp/q.tsv" --isns 2 --mode and-or --k 10 \
        --batch-size 6 --max-in-flight 8 --admission window --inject-delay-ms 5 \
        --coalesce-batches 1 --answer-thread "$a" --id-table "$table" \
        --run "$tmp/run-$a.txt" --metrics "$tmp/m-$a.json" > "$tmp/out-$a.txt" 2>&1 ||
        { cat "$tmp/out-$a.txt"; fail "--answer-thread $a: exit $?"; }
      "$gs" compare-runs "$tmp/ref.txt" "$tmp/run-$a.txt" || fail "--answer-thread $a differs from the reference"
      [ "$(metric "$tmp/m-$a.json" 'sorted({i["stats"]["answer_thread"] for i in m["isn"]})')" = "['$a']" ] ||
        fail "--answer-thread $a: the ISNs report $(metric "$tmp/m-$a.json" '[i["stats"]["answer_thread"] for i in m["isn"]]')"
      [ "$(metric "$tmp/m-$a.json" 'sorted({i["stats"]["id_table"] for i in m["isn"]})')" = "['$table']" ] ||
        fail "--id-table $table: the ISNs report $(metric "$tmp/m-$a.json" '[i["stats"]["id_table"] for i in m["isn"]]')"
    done
    cmp -s "$tmp/run-mpi.txt" "$tmp/run-engine.txt" || fail "the answer thread changed the run file"
    ahead=$(metric "$tmp/m-mpi.json" 'min(i["stats"]["batches_decoded_ahead"] for i in m["isn"])')
    none=$(metric "$tmp/m-engine.json" 'max(i["stats"]["batches_decoded_ahead"] for i in m["isn"])')
    [ "$ahead" -gt 0 ] || fail "--answer-thread mpi: an ISN decoded no batch ahead while its engine worked"
    [ "$none" = 0 ] || fail "--answer-thread engine: $none batches decoded ahead"
    echo "PASS: answers equal the reference either way (ids from huge pages and from the mapped files); each ISN decoded >= $ahead batches ahead"
    ;;
  admission)
    # Every batch computes 20 ms at each ISN (--inject-compute-ms): just-in-time admission sends
    # each batch about when the ISNs finish the one ahead, so batches do not queue there and a
    # query's latency is about one compute; window admission queues them behind each other.
    synthetic_index 2 "$tmp/idx"
    head -120 "$tmp/idx/queries.test.tsv" > "$tmp/q.tsv"
    "$gs" -q search --index "$tmp/idx" --queries "$tmp/q.tsv" --mode and-or --k 10 \
      --run "$tmp/ref.txt" >/dev/null
    for a in just-in-time window; do
      cluster --index "$tmp/idx" --queries "$tmp/q.tsv" --isns 2 --mode and-or --k 10 \
        --run "$tmp/run-$a.txt" --metrics "$tmp/m-$a.json" --batch-size 6 --admission "$a" \
        --coalesce-batches 1 --inject-compute-ms 20 > "$tmp/out-$a.txt" 2>&1 ||
        { cat "$tmp/out-$a.txt"; fail "$a: exit $?"; }
      "$gs" compare-runs "$tmp/ref.txt" "$tmp/run-$a.txt" || fail "$a differs from the reference"
      echo "$a: $(metric "$tmp/m-$a.json" '"%.1f s, latency p50 %.1f ms, queued at the ISN p50 %.1f ms, compute p50 %.1f ms" % (m["seconds"], m["latency_ms"]["p50"], m["stages_ms"]["isn_queue"]["p50"], m["stages_ms"]["isn_compute_max"]["p50"])')"
    done
    jit=$tmp/m-just-in-time.json win=$tmp/m-window.json
    [ "$(metric "$jit" 'm["admission"]["mode"]')" = just-in-time ] || fail "not admitted just in time"
    [ "$(metric "$jit" 'm["stages_ms"]["isn_queue"]["p50"] < 5')" = True ] ||
      fail "just in time: batches queued at the ISN (p50 $(metric "$jit" 'm["stages_ms"]["isn_queue"]["p50"]') ms)"
    [ "$(metric "$win" 'm["stages_ms"]["isn_queue"]["p50"] > 15')" = True ] ||
      fail "window: batches did not queue (p50 $(metric "$win" 'm["stages_ms"]["isn_queue"]["p50"]') ms): the test no longer compares"
    python3 - "$jit" "$win" <<'PY' || fail "just in time: latency or throughput"
import json, sys
j, w = (json.load(open(f)) for f in sys.argv[1:])
assert j["latency_ms"]["p50"] < 0.75 * w["latency_ms"]["p50"], (j["latency_ms"]["p50"], w["latency_ms"]["p50"])
assert j["seconds"] < 1.6 * w["seconds"], (j["seconds"], w["seconds"])  # the ISNs kept busy
PY
    echo "PASS: just-in-time admission: no queue at the ISNs, lower latency than the window, exact"
    ;;
  cuts)
    # ISN 2 computes 30 ms a batch, ISN 1 a few: once ISN 1 has answered, first-answer cuts the
    # next batch at once, so the batches queue at ISN 2 (up to the pipeline's depth);
    # predicted-finish times it to reach ISN 2 as ISN 2 is predicted to finish, and all-answers
    # waits for ISN 2's answer: no queue there.
    synthetic_index 2 "$tmp/idx"
    head -150 "$tmp/idx/queries.test.tsv" > "$tmp/q.tsv"
    "$gs" -q search --index "$tmp/idx" --queries "$tmp/q.tsv" --mode and-or --k 10 \
      --run "$tmp/ref.txt" >/dev/null
    for c in first-answer predicted-finish all-answers; do
      cluster --index "$tmp/idx" --queries "$tmp/q.tsv" --isns 2 --mode and-or --k 10 \
        --run "$tmp/run-$c.txt" --metrics "$tmp/m-$c.json" --batch-size 6 --coalesce-batches 1 \
        --admission-cut-on "$c" --inject-compute-ms 30 --inject-compute-rank 2 \
        > "$tmp/out-$c.txt" 2>&1 || { cat "$tmp/out-$c.txt"; fail "$c: exit $?"; }
      "$gs" compare-runs "$tmp/ref.txt" "$tmp/run-$c.txt" || fail "$c differs from the reference"
      [ "$(metric "$tmp/m-$c.json" 'm["admission"]["cut_on"]')" = "$c" ] ||
        fail "$c: the metrics say $(metric "$tmp/m-$c.json" 'm["admission"]')"
      echo "$c: $(metric "$tmp/m-$c.json" '"%.2f s, latency p50 %.1f ms, queued at the ISN p50 %.1f ms, depth max %d" % (m["seconds"], m["latency_ms"]["p50"], m["stages_ms"]["isn_queue"]["p50"], m["pipeline_depth"]["max"])')"
    done
    python3 - "$tmp"/m-first-answer.json "$tmp"/m-predicted-finish.json "$tmp"/m-all-answers.json <<'PY' || fail "cuts"
import json, sys
first, predicted, every = (json.load(open(f)) for f in sys.argv[1:])
queue = lambda m: m["stages_ms"]["isn_queue"]["p50"]
assert queue(first) > 15, ("first-answer did not queue batches at the slow ISN", queue(first))
assert queue(predicted) < 10, ("predicted-finish queued batches at the slow ISN", queue(predicted))
assert queue(every) < 10, ("all-answers queued batches at the slow ISN", queue(every))
lat = lambda m: m["latency_ms"]["p50"]
assert lat(predicted) < 0.8 * lat(first), (lat(predicted), lat(first))
assert predicted["seconds"] < 1.5 * first["seconds"], (predicted["seconds"], first["seconds"])
PY
    # The admission's resolving on three threads (rounds of 100 queries: split), exact.
    cluster --index "$tmp/idx" --queries "$tmp/q.tsv" --isns 2 --mode and-or --k 10 \
      --run "$tmp/run-threads.txt" --metrics "$tmp/m-threads.json" --batch-size 100 \
      --admission-threads 3 > "$tmp/out-threads.txt" 2>&1 ||
      { cat "$tmp/out-threads.txt"; fail "--admission-threads 3: exit $?"; }
    "$gs" compare-runs "$tmp/ref.txt" "$tmp/run-threads.txt" || fail "--admission-threads 3 differs"
    [ "$(metric "$tmp/m-threads.json" 'm["admission"]["threads"]')" = 3 ] || fail "admission threads not 3"
    # Every batch's admission split into chunks for the resolver's helpers (which of them the
    # helpers took depends on the machine's load; the answers do not).
    metric "$tmp/m-threads.json" 'm["admission"]["helpers"]["split_batches"] > 0 and m["admission"]["helpers"]["chunks"] >= 4 * m["admission"]["helpers"]["split_batches"]' |
      grep -qx True || fail "admission helpers: the metrics say $(metric "$tmp/m-threads.json" 'm["admission"]["helpers"]')"
    echo "admission helpers: $(metric "$tmp/m-threads.json" 'm["admission"]["helpers"]')"
    # The admission ahead (queries ready when the batch is expected to leave), with each cut:
    # exact, reported, and the spread of the two ISNs' answers measured (ISN 2 is ~30 ms slower).
    # --busy-poll hot for both programs; with predicted-finish --isn-busy-poll sending for the
    # ISNs alone.
    for c in first-answer predicted-finish; do
      isn_busy=hot isn_nice=2; [ "$c" = predicted-finish ] && isn_busy=sending isn_nice=3
      cluster --index "$tmp/idx" --queries "$tmp/q.tsv" --isns 2 --mode and-or --k 10 \
        --run "$tmp/run-ahead-$c.txt" --metrics "$tmp/m-ahead-$c.json" --batch-size 6 \
        --coalesce-batches 1 --admission-cut-on "$c" --admission-ahead on --inject-compute-ms 30 \
        --inject-compute-rank 2 --busy-poll hot --isn-busy-poll "$isn_busy" --mpi-thread-nice 2 \
        --isn-mpi-thread-nice "$isn_nice" \
        > "$tmp/out-ahead-$c.txt" 2>&1 ||
        { cat "$tmp/out-ahead-$c.txt"; fail "--admission-ahead on, $c: exit $?"; }
      "$gs" compare-runs "$tmp/ref.txt" "$tmp/run-ahead-$c.txt" ||
        fail "--admission-ahead on, $c differs from the reference"
      metric "$tmp/m-ahead-$c.json" 'm["admission"]["ahead"] and m["admission"]["answer_spread_us"] > 10000' |
        grep -qx True || fail "--admission-ahead on, $c: the metrics say $(metric "$tmp/m-ahead-$c.json" 'm["admission"]')"
    done
    # --busy-poll reaches both programs' pacers, --isn-busy-poll the ISNs' alone.
    for c in first-answer predicted-finish; do
      isn_busy=hot; [ "$c" = predicted-finish ] && isn_busy=sending
      metric "$tmp/m-ahead-$c.json" "m['progress']['busy_poll'] == 'hot' and all(i['stats']['progress']['busy_poll'] == '$isn_busy' for i in m['isn'])" |
        grep -qx True || fail "--busy-poll hot --isn-busy-poll $isn_busy: the pacers' stats say $(metric "$tmp/m-ahead-$c.json" "[m['progress']['busy_poll']] + [i['stats']['progress']['busy_poll'] for i in m['isn']]")"
    done
    # Every MPI thread reports its spells without a poll and its time without a core.
    metric "$tmp/m-ahead-predicted-finish.json" "all(p['long_rounds'] >= 0 and p['long_round_seconds'] >= 0 and p['max_round_us'] >= 0 and p['long_yields'] >= 0 and p['long_yield_seconds'] >= 0 for p in [m['progress']] + [i['stats']['progress'] for i in m['isn']]) and m['cpu_seconds']['main_thread_run_delay'] >= 0 and all(i['stats']['cpu_seconds']['mpi_thread_run_delay'] >= 0 for i in m['isn'])" |
      grep -qx True || fail "the pacers' long rounds and yields, the threads' run delay"
    # The aggregator's main thread times its own work: it admitted queries, posted batches and
    # received answers, within the run's time.
    metric "$tmp/m-ahead-predicted-finish.json" "(lambda w: w['admission'] > 0 and w['cut_and_send'] > 0 and w['receive'] > 0 and w['complete'] >= 0 and sum(w.values()) < m['cpu_seconds']['run_seconds'])(m['main_thread_work_seconds'])" |
      grep -qx True || fail "main_thread_work_seconds: $(metric "$tmp/m-ahead-predicted-finish.json" 'm.get("main_thread_work_seconds")')"
    # --mpi-thread-nice reaches every MPI thread, --isn-mpi-thread-nice the ISNs' alone.
    for c in first-answer predicted-finish; do
      isn_nice=2; [ "$c" = predicted-finish ] && isn_nice=3
      metric "$tmp/m-ahead-$c.json" "m['progress']['thread_nice'] == 2 and m['progress']['thread_nice_error'] == '' and all(i['stats']['progress']['thread_nice'] == $isn_nice and i['stats']['progress']['thread_nice_error'] == '' for i in m['isn'])" |
        grep -qx True || fail "--mpi-thread-nice 2 --isn-mpi-thread-nice $isn_nice: the pacers' stats say $(metric "$tmp/m-ahead-$c.json" "[m['progress']['thread_nice']] + [i['stats']['progress']['thread_nice'] for i in m['isn']]")"
    done
    # Each ISN times every answer's way out: encoded -> posted -> sent.
    metric "$tmp/m-ahead-predicted-finish.json" 'all(i["stats"]["answer_post_us"]["count"] == i["stats"]["batches"] > 0 and i["stats"]["answer_send_us"]["count"] == i["stats"]["batches"] and 0 <= i["stats"]["answer_post_us"]["p50"] <= i["stats"]["answer_post_us"]["max"] for i in m["isn"])' |
      grep -qx True || fail "the ISNs' answer_post_us and answer_send_us: $(metric "$tmp/m-ahead-predicted-finish.json" '[(i["stats"]["batches"], i["stats"].get("answer_post_us"), i["stats"].get("answer_send_us")) for i in m["isn"]]')"
    [ "$(metric "$tmp/m-predicted-finish.json" 'm["admission"]["ahead"]')" = False ] ||
      fail "the admission ahead is on by default"
    echo "PASS: just-in-time cuts: first-answer queues at the slow ISN, predicted-finish and all-answers do not; exact (also with 3 admission threads, and with the admission ahead)"
    ;;
  depths)
    synthetic_index 2 "$tmp/idx"
    # Repeats answered by the result cache come back before the batches in flight, and cost
    # buckets reorder queries within and across batches: only the arrival-order writer puts the
    # run file back in query-file order.
    { cat "$tmp/idx/queries.test.tsv"; head -40 "$tmp/idx/queries.test.tsv" | sed 's/^/r/'; } > "$tmp/q.tsv"
    "$gs" -q search --index "$tmp/idx" --queries "$tmp/q.tsv" --mode and-or --k 10 \
      --run "$tmp/ref.txt" >/dev/null
    awk '{print $1}' "$tmp/ref.txt" | uniq > "$tmp/ref-order.txt"
    # Window admission (queries admitted ahead, batches queued at the ISNs) at every depth, then
    # just-in-time admission (the closed-loop default: batches timed to the ISNs' finish).
    for run in window-1 window-2 window-3 window-4 window-5 window-6 window-7 window-8 window-0 \
               just-in-time-1 just-in-time-3 just-in-time-8 just-in-time-0; do
      admission=${run%-*} depth=${run##*-}
      cluster --index "$tmp/idx" --queries "$tmp/q.tsv" --isns 2 --mode and-or --k 10 \
        --run "$tmp/run-$run.txt" --metrics "$tmp/m-$run.json" --batch-size 6 --cost-buckets \
        --cache-entries 1000 --max-in-flight "$depth" --admission "$admission" > "$tmp/out-$run.txt" 2>&1 ||
        { cat "$tmp/out-$run.txt"; fail "$run: exit $?"; }
      "$gs" compare-runs "$tmp/ref.txt" "$tmp/run-$run.txt" || fail "$run differs from the reference"
      awk '{print $1}' "$tmp/run-$run.txt" | uniq | cmp -s - "$tmp/ref-order.txt" ||
        fail "$run: the run file is not in arrival order"
      cmp -s "$tmp/run-window-1.txt" "$tmp/run-$run.txt" || fail "$run: run file bytes differ from window-1"
      [ "$(metric "$tmp/m-$run.json" 'm["queries"]["partial"]')" = 0 ] || fail "$run: partial answers"
      [ "$(metric "$tmp/m-$run.json" 'm["admission"]["mode"]')" = "$admission" ] ||
        fail "$run: admitted $(metric "$tmp/m-$run.json" 'm["admission"]')"
      if [ "$depth" != 0 ]; then
        [ "$(metric "$tmp/m-$run.json" 'int(m["pipeline_depth"]["max"])')" = "$depth" ] ||
          fail "$run: ran at $(metric "$tmp/m-$run.json" 'm["pipeline_depth"]')"
      fi
    done
    [ "$(metric "$tmp/m-window-1.json" 'm["queries"]["cache_hits"] >= 40')" = True ] || fail "no cache hits"
    [ "$(metric "$tmp/m-window-8.json" 'm["run_file_order"]["max_answers_waiting"] > 1')" = True ] ||
      fail "window-8: no answer ever came out of order (the writer was not exercised)"
    echo "PASS: pipeline depths 1..8 and automatic, window and just-in-time admission: exact, in arrival order, identical run files"
    ;;
  ranker)
    "$gs" -q index --synthetic "docs=3000,seed=11,train_queries=5,test_queries=100,mean_length=120" \
      --shards 2 --out "$tmp/idx" --forward-index >/dev/null
    "$gs" ranker-store generate --store "$tmp/store" --mix 30 --seed 3 >/dev/null
    # 80 queries, 10 more with their own ranker (third column), 10 repeats for the result cache.
    { head -80 "$tmp/idx/queries.test.tsv"
      sed -n '81,90p' "$tmp/idx/queries.test.tsv" | sed 's/^/own/; s/$/\tmix-005/'
      head -10 "$tmp/idx/queries.test.tsv" | sed 's/^/r/'; } > "$tmp/q.tsv"
    rank=(--ranker-store "$tmp/store" --candidates 200 --ranker-cache-mb 0.25)  # ~5 rankers
    "$gs" -q search --index "$tmp/idx" --queries "$tmp/q.tsv" "${rank[@]}" --ranker-mix 1.0 \
      --run "$tmp/ref-mix.txt" >/dev/null
    "$gs" -q search --index "$tmp/idx" --queries "$tmp/q.tsv" "${rank[@]}" --ranker mix-007 \
      --run "$tmp/ref-one.txt" >/dev/null
    for policy in coordinated per-isn-lru; do
      m="$tmp/m-$policy.json"
      cluster --index "$tmp/idx" --queries "$tmp/q.tsv" --isns 2 --run "$tmp/run-$policy.txt" \
        --metrics "$m" "${rank[@]}" --ranker-mix 1.0 --ranker-cache-policy "$policy" \
        --batch-size 8 --max-in-flight 3 --cache-entries 100 > "$tmp/out.txt" 2>&1 ||
        { cat "$tmp/out.txt"; fail "$policy: exit $?"; }
      "$gs" compare-runs "$tmp/ref-mix.txt" "$tmp/run-$policy.txt" || fail "$policy: differs from gpusearch search"
      c='m["second_stage"]["ranker_cache"]'
      [ "$(metric "$m" "$c['total']['requests'] > 0 and m['second_stage']['ranker_fallback_queries'] == 0")" = True ] ||
        fail "$policy: nothing ranked, or fallbacks"
      if [ "$policy" = coordinated ]; then
        [ "$(metric "$m" "$c['total']['unplanned_loads'] + $c['total']['unplanned_evictions']")" = 0 ] ||
          fail "coordinated: unplanned loads or evictions on an ISN"
        [ "$(metric "$m" "$c['total']['loads'] == 2 * $c['coordinator']['loads'] and $c['total']['evictions'] == 2 * $c['coordinator']['evictions']")" = True ] ||
          fail "coordinated: the ISNs' loads and evictions are not the coordinator's plan"
        [ "$(metric "$m" "$c['control_messages'] == 2 * $c['coordinator']['plans_sent'] > 0")" = True ] ||
          fail "coordinated: control messages not counted"
        coordinated_rate=$(metric "$m" "$c['total']['hit_rate']")
      else
        [ "$(metric "$m" "$c['control_messages']")" = 0 ] || fail "per-isn-lru: control messages sent"
        lru_rate=$(metric "$m" "$c['total']['hit_rate']")
      fi
    done
    cluster --index "$tmp/idx" --queries "$tmp/q.tsv" --isns 2 --run "$tmp/run-one.txt" \
      --metrics "$tmp/m-one.json" "${rank[@]}" --ranker mix-007 --batch-size 8 > "$tmp/out.txt" 2>&1 ||
      { cat "$tmp/out.txt"; fail "--ranker: exit $?"; }
    "$gs" compare-runs "$tmp/ref-one.txt" "$tmp/run-one.txt" || fail "--ranker: differs from gpusearch search"
    # Through the RPC front end: each request names its own ranker (the file's third column, sent
    # by gpusearch load), the others get the mix's draw; the same answers as gpusearch search.
    serve --index "$tmp/idx" --isns 2 --run "$tmp/rpc-run.txt" --metrics "$tmp/rpc-m.json" \
      "${rank[@]}" --ranker-mix 1.0 --batch-size 8
    "$gs" load --connect "$addr" --queries "$tmp/q.tsv" --qps 200 --duration 10 --limit 100 \
      --run "$tmp/rpc-load.txt" --metrics "$tmp/rpc-load.json" > "$tmp/load.txt" 2>&1 ||
      { cat "$tmp/load.txt" "$tmp/serve.txt"; fail "ranker: load reported errors"; }
    stop_serving
    "$gs" compare-runs "$tmp/ref-mix.txt" "$tmp/rpc-load.txt" ||
      fail "ranker: RPC answers (own rankers named in the requests) differ from gpusearch search"
    [ "$(metric "$tmp/rpc-m.json" "m['second_stage']['ranker_fallback_queries']")" = 0 ] ||
      fail "ranker: RPC queries fell back to the first stage"
    echo "PASS: two-stage cluster runs equal gpusearch search (mix, own rankers, one ranker, and through the RPC front end); ranker hit rate coordinated $coordinated_rate, per-ISN LRU $lru_rate"
    ;;
  badranker)
    "$gs" -q index --synthetic "docs=3000,seed=11,train_queries=5,test_queries=60,mean_length=120" \
      --shards 2 --out "$tmp/idx" --forward-index >/dev/null
    "$gs" ranker-store generate --store "$tmp/store" --mix 4 --seed 3 >/dev/null
    echo garbage >> "$tmp/store/mix-002.ranker.json"  # changed since indexing: malformed
    # Every query on the broken ranker; ten name a ranker the store lacks.
    { head -50 "$tmp/idx/queries.test.tsv"
      sed -n '51,60p' "$tmp/idx/queries.test.tsv" | sed 's/$/\tno-such-ranker/'; } > "$tmp/q.tsv"
    # The first stage alone: the answers the fallback must give.
    "$gs" -q search --index "$tmp/idx" --queries "$tmp/q.tsv" --run "$tmp/ref.txt" >/dev/null
    for policy in coordinated per-isn-lru; do
      m="$tmp/m-$policy.json"
      cluster --index "$tmp/idx" --queries "$tmp/q.tsv" --isns 2 --run "$tmp/run.txt" --metrics "$m" \
        --ranker-store "$tmp/store" --ranker mix-002 --candidates 100 --ranker-cache-policy "$policy" \
        --batch-size 8 > "$tmp/out.txt" 2>&1 || { cat "$tmp/out.txt"; fail "$policy: exit $?"; }
      "$gs" compare-runs "$tmp/ref.txt" "$tmp/run.txt" || fail "$policy: fallback answers differ from the first stage"
      [ "$(metric "$m" 'm["queries"]["run"]')" = 60 ] || fail "$policy: queries lost"
      [ "$(metric "$m" 'm["second_stage"]["ranker_fallback_queries"]')" = 60 ] || fail "$policy: fallbacks not counted"
      msgs=$(metric "$m" '"\n".join(m["second_stage"]["fallback_messages"])')
      grep -q "mix-002.ranker.json" <<< "$msgs" || { echo "$msgs"; fail "$policy: the error does not name the file"; }
      grep -q "store.json" <<< "$msgs" || { echo "$msgs"; fail "$policy: the unknown ranker's error does not name the store"; }
    done
    echo "PASS: a malformed and an unknown ranker: first-stage answers, flagged and counted, errors naming the file and the store"
    ;;
  *) fail "unknown case $case_name" ;;
esac
