// gpusearch-aggregator: rank 0 of the cluster (launch/cluster.sh starts it under mpirun with the
// ISNs as ranks 1..N). Flags in, run_aggregator, summary out.
#include <mpi.h>

#include <chrono>
#include <csignal>
#include <fstream>
#include <iostream>

#include <CLI/CLI.hpp>

#include "aggregator/aggregator.hpp"
#include "aggregator/rpc_front_end.hpp"
#include "common/error.hpp"
#include "common/wire/progress_flags.hpp"

using namespace gpusearch;

int main(int argc, char** argv) {
  CLI::App app{
      "gpusearch-aggregator: batches, broadcasts, merges (rank 0 of the cluster's mpirun)"};
  AggregatorOptions o;
  std::string mode = "or", scoring = "bm25";
  bool quiet = false;
  std::string abort_marker;
  app.add_option("--index", o.index_dir, "index directory (its manifest and shard 0's lexicon)")
      ->required();
  auto* queries_opt =
      app.add_option("--queries", o.queries,
                     "queries: TSV or TREC topics file, or - for TSV on standard input")
          ->capture_default_str();
  auto* listen_opt = app.add_option(
      "--listen", o.front_end.listen,
      "serve live queries over Cap'n Proto RPC on ADDR:PORT (e.g. 127.0.0.1:7300; port 0: any "
      "free one) or unix:PATH (a Unix-domain socket, local clients only) until a shutdown request or SIGTERM, instead of replaying --queries");
  listen_opt->excludes(queries_opt);
  app.add_option("--address-file", o.front_end.address_file,
                 "with --listen: write the bound ADDR:PORT here once listening");
  app.add_option("--operator-token-file", o.front_end.token_file,
                 "with --listen: the shutdown token is written here, readable by this user only "
                 "(default: RUN.token)");
  app.add_option("--max-requests", o.front_end.max_requests,
                 "with --listen: requests admitted and unanswered over all clients; more are "
                 "refused (overloaded)")
      ->capture_default_str()
      ->check(CLI::Range(std::size_t(1), std::size_t(1) << 20));
  app.add_option("--max-per-client", o.front_end.max_per_client,
                 "with --listen: requests in flight per connection; more are refused (overloaded)")
      ->capture_default_str()
      ->check(CLI::Range(std::size_t(1), std::size_t(1) << 20));
  std::string rpc_poll = "block";
  unsigned rpc_spin_us = 5000;
  app.add_option("--rpc-poll", rpc_poll,
                 "with --listen: how the front end's event loop waits: block (sleep in epoll), "
                 "spin (poll all the time: a core), adaptive (poll while requests are in flight, "
                 "up to --rpc-spin-us after the last event, else sleep)")
      ->capture_default_str();
  app.add_option("--rpc-spin-us", rpc_spin_us,
                 "with --rpc-poll adaptive: the longest the loop polls after its last event")
      ->capture_default_str()
      ->check(CLI::Range(0u, 1000000u));
  std::string rpc_thread;
  app.add_option("--rpc-thread", rpc_thread,
                 "with --listen: where the front end's event loop runs: CPU (pinned there, with "
                 "the merge thread), rt (real-time priority, SCHED_FIFO 1) or CPU,rt; default: "
                 "anywhere, normal priority");
  app.add_option("--run", o.run_path, "TREC run output")->required();
  app.add_option("--metrics", o.metrics_path, "metrics JSON output");
  app.add_option("--tag", o.run_tag, "run tag (last column)")->capture_default_str();
  app.add_option("--mode", mode, "and, or, and-or")->capture_default_str();
  app.add_option("--k", o.params.k, "results per query")
      ->capture_default_str()
      ->check(CLI::Range(1u, 100000u));
  app.add_option("--scoring", scoring, "bm25 or bm25-pr")->capture_default_str();
  app.add_option("--alpha", o.alpha, "bm25-pr alpha (default: the index's)")
      ->check(CLI::Range(0.0, 1.0));
  app.add_option("--max-query-terms", o.limits.max_terms, "reject longer queries")
      ->capture_default_str();
  app.add_option("--batch-size", o.batching.batch_size, "queries per batch (at most)")
      ->capture_default_str()
      ->check(CLI::Range(std::size_t(1), std::size_t(65536)));
  app.add_option("--max-wait-us", o.batching.max_wait_us,
                 "cut a batch once its oldest query waited this long")
      ->capture_default_str();
  app.add_flag("--cost-buckets", o.batching.cost_buckets,
               "batch queries of similar shortest-list length together (paper 003)");
  app.add_option("--max-in-flight", o.max_in_flight,
                 "batches broadcast and not yet answered; 0: chosen from measured latencies")
      ->capture_default_str()
      ->check(CLI::Range(std::size_t(0), std::size_t(1024)));
  app.add_option("--max-depth", o.max_depth,
                 "the most batches in flight that --max-in-flight 0 "
                 "chooses")
      ->capture_default_str()
      ->check(CLI::Range(std::size_t(1), std::size_t(1024)));
  std::string progress = "adaptive";
  wire::add_progress_flags(app, progress, o.pacing);
  std::size_t shm_eager_bytes = wire::kDefaultShmEagerBytes;  // took effect before MPI_Init
  wire::add_shm_eager_flag(app, shm_eager_bytes);
  auto* timeline_opt = app.add_option(
      "--timeline-batches", o.timeline_batches,
      "batches recorded in the metrics' timeline (default 100000; 1000 with --listen)");
  app.add_option(
      "--window", o.window,
      "closed-loop replay: queries admitted ahead (default batch-size * (pipeline depth + 1))");
  std::string admission = "just-in-time";
  app.add_option("--admission", admission,
                 "closed-loop replay: just-in-time (a batch's queries are admitted when it is "
                 "cut, timed to reach the ISNs as they finish the batches ahead) or window "
                 "(--window queries admitted ahead; batches queue at the ISNs); --window implies "
                 "window")
      ->capture_default_str()
      ->check(CLI::IsMember({"just-in-time", "window"}));
  app.add_option("--admission-quantile", o.admission_quantile,
                 "just-in-time: the next batch is aimed behind the batches ahead as if the last "
                 "of them took this quantile of the slowest ISN's compute over the last 64 "
                 "batches (0: the mean compute), and cut at once when their answers come back "
                 "first (higher: fewer batches queued at the ISNs, more ISN idle)")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1.0));
  app.add_option("--admission-lag", o.admission_lag,
                 "just-in-time: how long after the aim the next batch should reach the slowest "
                 "ISN, as a share of the mean compute (negative: before; session 29's aim: "
                 "--admission-quantile 0 --admission-lag 0.2)")
      ->capture_default_str()
      ->check(CLI::Range(-1.0, 10.0));
  std::string cut_on = "predicted-finish";
  app.add_option("--admission-cut-on", cut_on,
                 "just-in-time, once some ISNs have answered the batches ahead and others not: "
                 "cut the next batch at the first answer (first-answer: the most throughput, "
                 "the others find it queued), timed to reach the slowest ISN as it is predicted "
                 "to finish (predicted-finish), or only once every ISN has answered (all-answers: "
                 "the least latency); with one ISN all the same")
      ->capture_default_str()
      ->check(CLI::IsMember({"first-answer", "predicted-finish", "all-answers"}));
  std::string admission_ahead = "off";
  app.add_option("--admission-ahead", admission_ahead,
                 "just-in-time: admit the next batch's queries to be ready when the answers "
                 "ahead could come back (at the 0.1 quantile of the slowest ISN's compute), so "
                 "that their admission overlaps the ISNs' compute (on: more throughput), or for "
                 "the aim's cut, after most batches' answers (off: less latency)")
      ->capture_default_str()
      ->check(CLI::IsMember({"on", "off"}));
  std::string admission_threads = "auto";
  app.add_option("--admission-threads", admission_threads,
                 "threads that resolve the queries admitted together (a batch's, just in time), "
                 "at least 32 queries each; 1: the MPI thread alone; auto: 1 below 128 queries "
                 "a batch, else a quarter of the usable cores, at most 4")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto"}) | CLI::Range(1u, 64u));
  app.add_option("--qps", o.qps, "replay the query file at this arrival rate (0: closed loop)")
      ->capture_default_str();
  app.add_option("--cache-entries", o.cache_entries, "LRU result cache entries (0: off)")
      ->capture_default_str();
  app.add_option("--deadline-ms", o.deadline_ms,
                 "per batch: answer without ISNs that miss it (partial); 0: none")
      ->capture_default_str();
  app.add_option("--shutdown-grace-ms", o.shutdown_grace_ms,
                 "wait this long for ISNs at shutdown, then MPI_Abort")
      ->capture_default_str();
  app.add_option("--isn-dead-after", o.isn_dead_after,
                 "declare an ISN dead after this many batch deadlines missed in a row: send it "
                 "nothing more, answer without it (partial); 0: never")
      ->capture_default_str();
  app.add_option("--start-timeout-ms", o.start_timeout_ms,
                 "wait this long for ISNs to open their shards")
      ->capture_default_str();
  // Two-stage ranking (issue 12); the ISNs get the same flags.
  double ranker_cache_mb = 0;
  std::string ranker_cache_policy = "coordinated";
  app.add_option("--ranker-store", o.ranking.store_dir,
                 "ranker store (a folder with store.json): each ISN ranks its first-stage "
                 "candidates with the query's ranker")
      ->check(CLI::ExistingDirectory);
  app.add_option("--ranker", o.ranking.ranker,
                 "ranker of every query without its own (the query file's third column)");
  app.add_option("--ranker-mix", o.ranking.mix_exponent,
                 "draw each query's ranker from a Zipf mix over the store with this exponent");
  app.add_option("--ranker-mix-seed", o.ranking.mix_seed, "seed of the mix's draws")
      ->capture_default_str();
  app.add_option("--candidates", o.ranking.candidates,
                 "first-stage candidates per shard for the second stage (default 1000, at most "
                 "10000)");
  app.add_option("--ranker-cache-mb", ranker_cache_mb,
                 "each ISN's ranker cache in MiB (default: unbounded)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--ranker-cache-policy", ranker_cache_policy,
                 "coordinated (the aggregator loads and evicts rankers on every ISN before each "
                 "batch and groups queries by ranker) or per-isn-lru (each ISN's own LRU)")
      ->capture_default_str();
  app.add_flag("-q,--quiet", quiet, "no progress line");
  app.add_option(
      "--abort-marker", abort_marker,
      "file written just before the job is aborted for a stuck ISN (cluster.sh watches it)");
  app.allow_extras();  // ISN-only flags passed through by launch/cluster.sh are ignored
  // Before MPI_Init, which reads Open MPI's parameters from the environment.
  wire::prefer_eager_shared_memory(wire::shm_eager_bytes_in(argc, argv));
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return wire::end_after_flag_error(app, e);
  }
  int rc = 0;
  try {
    o.params.mode = parse_mode(mode);
    o.params.scoring = parse_scoring(scoring);
    o.progress = !quiet;
    o.ranking.cache_bytes = std::uint64_t(ranker_cache_mb * 1048576.0);
    o.ranking.policy = parse_ranker_cache_policy(ranker_cache_policy);
    o.pacing.mode = wire::parse_progress_mode(progress);
    o.admission = parse_closed_loop_admission(admission);
    o.cut_on = parse_just_in_time_cut(cut_on);
    o.admission_ahead = admission_ahead == "on";
    o.admission_threads =
        admission_threads == "auto" ? 0u : unsigned(std::stoul(admission_threads));
    o.front_end.polling.mode = parse_rpc_poll_mode(rpc_poll);
    o.front_end.polling.spin = std::chrono::microseconds(rpc_spin_us);
    o.front_end.loop_thread = parse_thread_placement(rpc_thread, "--rpc-thread");
    if (!o.front_end.listen.empty()) {
      if (o.front_end.token_file.empty()) o.front_end.token_file = o.run_path.string() + ".token";
      // A serving run has no end known in advance: keep the timeline (about 1 KB per batch)
      // short unless asked otherwise.
      if (timeline_opt->count() == 0) o.timeline_batches = 1000;
      o.front_end.max_text_bytes = o.limits.max_text_bytes;
      o.front_end.second_stage = o.ranking.enabled();
      // SIGTERM ends a serving run as a shutdown request does: answers in flight are finished,
      // the run and metrics written.
      std::signal(SIGTERM, [](int) { g_stop_requested = true; });
    }
    const AggregatorOutcome out = run_aggregator(o, MPI_COMM_WORLD);
    if (!out.metrics.is_null()) print_aggregator_summary(out.metrics, std::cout);
    if (out.metrics.is_object())
      std::cout << "  run written to " << o.run_path.string()
                << (o.metrics_path.empty() ? "" : ", metrics to " + o.metrics_path.string())
                << '\n';
    std::cout.flush();
    rc = out.exit_code;
    if (out.abort_job) {
      // A stuck ISN would block MPI_Finalize: end the job. Open MPI 4.1.4's mpirun was seen to
      // crash or hang in its own teardown after an abort, so tell launch/cluster.sh first; it
      // kills mpirun if it has not ended a few seconds later.
      if (!abort_marker.empty()) std::ofstream(abort_marker) << rc << '\n';
      std::cerr.flush();
      MPI_Abort(MPI_COMM_WORLD, rc);
    }
    // mpirun --enable-recovery (launch/cluster.sh's default) ends with 0 whatever the ranks
    // return: a failed run (bad ISN flags, an ISN error at hello) tells cluster.sh its status
    // through the marker too.
    if (rc != 0 && !abort_marker.empty()) std::ofstream(abort_marker) << rc << '\n';
  } catch (const std::exception& e) {
    std::cerr << "gpusearch-aggregator: error: " << e.what() << '\n';
    if (!abort_marker.empty()) std::ofstream(abort_marker) << 1 << '\n';
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  MPI_Finalize();
  return rc;
}
