// gpusearch-isn: one index-serving node of the cluster (launch/cluster.sh starts it under
// mpirun as ranks 1..N). Flags in, run_isn, exit code out.
#include <mpi.h>

#include <cmath>
#include <iostream>
#include <memory>

#include <tbb/global_control.h>
#include <CLI/CLI.hpp>

#include "common/error.hpp"
#include "common/types.hpp"
#include "common/wire/progress_flags.hpp"
#include "isn/isn_server.hpp"
#include "isn/list_cache_flags.hpp"

using namespace gpusearch;

int main(int argc, char** argv) {
  CLI::App app{"gpusearch-isn: an index-serving node (rank >= 1 of the cluster's mpirun)"};
  IsnOptions o;
  o.engine.engine = kDefaultIsnEngine;
  int threads = 0;
  bool no_verify = false;
  app.add_option("--index", o.index_dir, "index directory (this ISN serves shard rank-1)")
      ->required();
  app.add_option("--engine", o.engine.engine, "engine: reference, cpu, gpu (as built)")
      ->capture_default_str();
  app.add_option("--algorithm", o.engine.algorithm, "engine algorithm (default: the engine's)");
  app.add_option("--intra-query", o.engine.intra_query_threads, "cpu: threads per query")
      ->capture_default_str();
  app.add_option("--share-refresh", o.engine.shared_threshold_refresh,
                 "cpu: a threshold shared with other runs (--intra-query, --share-thresholds) "
                 "is re-read every this many checks (1: every check)")
      ->capture_default_str()
      ->check(CLI::Range(1u, 1u << 20));
  app.add_option("--fallback-engine", o.fallback_engine, "CPU engine used after a failure")
      ->capture_default_str();
  app.add_option("--threads", threads, "worker threads (default: all cores)");
  app.add_option("--gpus-per-isn", o.gpus_per_isn, "GPUs per ISN: the first is local rank * this; above 1 the shard is split by docID "
                 "range across them (or the queries: --gpu-split)")
      ->capture_default_str();
  app.add_option("--gpu", o.engine.gpu_device, "device ordinal (default: by local rank)");
  app.add_option("--gpu-split", o.engine.gpu_split,
                 "gpu, --gpus-per-isn above 1: ranges (the shard split by docID range across the "
                 "GPUs, top-k merged through NCCL) or queries (every GPU the whole shard and a "
                 "share of each batch's queries)")
      ->capture_default_str();  // checked at start-up (make_engine): the hello's error
  app.add_flag("--gpu-range-engine", o.engine.gpu_range_engine,
               "gpu: the per-range multi-GPU engine (docID ranges merged through NCCL) even with "
               "one GPU per ISN");
  app.add_option("--gpu-blocks-per-sm", o.engine.gpu_blocks_per_sm,
                 "gpu: thread blocks a batch aims at per multiprocessor (0: by batch size)")
      ->capture_default_str()
      ->check(CLI::Range(0u, 64u));
  app.add_option("--gpu-posting-layout", o.engine.gpu_posting_layout,
                 "gpu: how the OR kernel reads postings: auto (decoded where it takes at most half "
                 "of the free device memory), compressed, or decoded (docID + impact, 8 bytes a "
                 "posting)")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "compressed", "decoded"}));
  app.add_option("--batch-chunk", o.parallel_chunk_queries,
                 "queries per parallel task within a batch")
      ->capture_default_str();
  IsnSchedulerOptions& so = o.scheduler;
  unsigned deadline_ms = 500;
  std::string lbd_short_on = "gpu";
  app.add_option("--scheduler", so.policy,
                 "run the CPU engine and the --engine engine at once, a processor per query: "
                 "cpu, gpu, lbd, queues, best-serial (default: one engine)");
  app.add_option("--scheduler-deadline-ms", deadline_ms,
                 "scheduler: a query's deadline after arrival (queues: urgent at half of it)")
      ->capture_default_str();
  app.add_option("--scheduler-train", so.train_file,
                 "scheduler queues: training queries for the cost predictor (default: "
                 "INDEX/queries.train.tsv where present)");
  app.add_option("--scheduler-train-queries", so.train_queries,
                 "scheduler queues: training queries used")
      ->capture_default_str();
  app.add_option("--lbd-blocks", so.scheduling.lbd_threshold_blocks,
                 "scheduler lbd: threshold S on a query's total blocks (paper 002)")
      ->capture_default_str();
  app.add_option("--lbd-short-on", lbd_short_on,
                 "scheduler lbd: the processor for queries below S (gpu, as paper 002, or cpu)")
      ->capture_default_str();
  app.add_option("--scheduler-ratio", so.scheduling.preference_ratio,
                 "scheduler queues: predicted cost ratio that makes a query prefer a processor")
      ->capture_default_str();
  app.add_option("--scheduler-cpu-workers", so.cpu_workers,
                 "scheduler: CPU processor threads (0: half the oneTBB parallelism allowed, at "
                 "least 1; the GPU engine's host pipeline needs the other cores)")
      ->capture_default_str();
  app.add_option("--scheduler-routing", so.routing,
                 "scheduler queues: specialize (the CPU takes the queries it answers cheapest, "
                 "as many as it answers without the GPU stealing), lone-cost (paper 001: "
                 "predicted lone costs, --scheduler-ratio) or capacity (the processor expected "
                 "to finish a query first, by each processor's measured capacity and queued "
                 "work; relative advantage where close)")
      ->capture_default_str();
  // The run's parameters, as the aggregator is given them (launch/cluster.sh passes them to
  // both): with a scheduler that predicts costs, its predictor trains on them at start-up.
  std::string run_mode, run_scoring = "bm25";
  unsigned run_k = 10;
  double run_alpha = std::nan("");
  app.add_option("--mode", run_mode,
                 "the run's mode (and, or, and-or), known at start-up: --scheduler queues and "
                 "best-serial train their predictor on it before the hello instead of in the "
                 "first batch (default: at the first batch, with its parameters)");
  app.add_option("--k", run_k, "with --mode: the run's k")->capture_default_str();
  app.add_option("--scoring", run_scoring, "with --mode: the run's scoring")->capture_default_str();
  app.add_option("--alpha", run_alpha,
                 "with --mode: the run's bm25-pr alpha (default: the index's)");
  app.add_option("--scheduler-batches-in-flight", so.batches_in_flight,
                 "scheduler: batches whose jobs are queued before the oldest is answered (the "
                 "processors stay busy across batch boundaries); 1: one batch at a time")
      ->capture_default_str();
  app.add_option("--scheduler-refit-every", so.refit_every,
                 "scheduler queues: refit the CPU cost model after this many CPU jobs, on the "
                 "training costs and the newest jobs' own (0: never)")
      ->capture_default_str();
  app.add_option("--scheduler-cost-model", so.cost_model,
                 "scheduler: each processor's cost model: linear (least squares on the features' "
                 "logarithms), trees (boosted, XGBoost) or best (whichever misses less on a "
                 "held-out quarter of the training costs)")
      ->capture_default_str()
      ->check(CLI::IsMember({"linear", "trees", "best"}));
  app.add_option("--scheduler-and-probe", so.scheduling.and_probe_blocks,
                 "scheduler, and-or: the cost features probe whether a query's AND phase finds k "
                 "matches, decoding at most this many blocks (0: off); training and scheduling "
                 "use the same")
      ->capture_default_str();
  app.add_option("--gpu-max-batch", so.gpu_max_batch,
                 "scheduler: most queries per call of the GPU-side engine")
      ->capture_default_str();
  add_list_cache_flags(app, o.engine.list_cache);
  app.add_flag("--no-verify", no_verify, "skip checksum verification when opening the shard");
  app.add_option_function<std::string>(
         "--id-table",
         [&o](const std::string& s) { o.id_table_in_huge_pages = s == "huge-pages"; },
         "where the answers' external ids are looked up: huge-pages (a copy of the shard's id "
         "table in anonymous memory asking for huge pages, about 20 bytes a document: fewer TLB "
         "misses per answer) or mapped (the shard's files, shared with the page cache)")
      ->check(CLI::IsMember({"huge-pages", "mapped"}))
      ->default_str("huge-pages");
  // The old name (--inject-gpu-fault-at-batch) stays an alias: the hook fails any engine.
  app.add_option("--inject-engine-fault-at-batch,--inject-gpu-fault-at-batch",
                 o.inject_engine_fault_at_batch,
                 "test: the engine (any) fails from this batch on (counting from 1); the ISN "
                 "finishes on its fallback engine");
  app.add_option("--coalesce-batches", o.coalesce_batches,
                 "batches waiting when the engine frees up join one engine call, up to this many "
                 "(same search parameters; 1: one call per batch; not with --scheduler)")
      ->capture_default_str()
      ->check(CLI::Range(1u, 64u));
  app.add_option_function<std::string>(
         "--answer-thread",
         [&o](const std::string& s) { o.answers_on_mpi_thread = s == "mpi"; },
         "who encodes each answer and decodes a batch that arrives while the engine works: mpi "
         "(the MPI thread: the engine thread goes straight on to the next batch) or engine")
      ->check(CLI::IsMember({"mpi", "engine"}))
      ->default_str("mpi");
  app.add_option("--inject-delay-ms", o.inject_delay_ms, "test: sleep this long before each batch");
  app.add_flag("--probe-memo-answers", o.engine.probe_memo_answers,
               "probe of the cluster's own cost: answer a query seen before (same terms, same "
               "parameters) from memory, with the engine's own first answer, instead of searching");
  app.add_option("--inject-delay-rank", o.inject_delay_rank,
                 "test: only this rank sleeps (-1: all)");
  app.add_option("--inject-compute-ms", o.inject_compute_ms,
                 "test: each batch's engine call lasts at least this long (a sleep counted as "
                 "compute; joined batches: this long each)");
  app.add_option("--inject-compute-rank", o.inject_compute_rank,
                 "test: only this rank's compute is padded by --inject-compute-ms (-1: all)");
  std::string progress = "adaptive";
  wire::add_progress_flags(app, progress, o.pacing);
  std::size_t shm_eager_bytes = wire::kDefaultShmEagerBytes;  // took effect before MPI_Init
  wire::add_shm_eager_flag(app, shm_eager_bytes);
  // launch/cluster.sh passes the same flags to every rank: this one sets the ISNs' alone (four
  // ISNs' MPI threads polling without a yield take four of the engines' cores; the aggregator's
  // one thread takes one).
  app.add_option_function<std::string>(
         "--isn-busy-poll",
         [&o](const std::string& s) { o.pacing.busy_poll = wire::parse_busy_poll(s); },
         "the ISNs' --busy-poll, whatever the aggregator's (default: --busy-poll's value)")
      ->check(CLI::IsMember({"off", "sending", "hot"}));
  // The same for the nice value: the aggregator's one thread weighted above the engines takes
  // little from them; four ISNs' MPI threads so weighted preempt their engines mid-batch.
  app.add_option("--isn-mpi-thread-nice", o.pacing.thread_nice,
                 "the ISNs' --mpi-thread-nice, whatever the aggregator's (default: "
                 "--mpi-thread-nice's value)")
      ->check(CLI::Range(-20, 19));
  // Two-stage ranking (issue 12): the store this ISN ranks with and its ranker cache. The
  // aggregator assigns rankers (--ranker, --ranker-mix) and candidates; they come with the batch.
  double ranker_cache_mb = 0;
  app.add_option("--ranker-store", o.ranking.store_dir, "ranker store (a folder with store.json)")
      ->check(CLI::ExistingDirectory);
  app.add_option("--ranker-cache-mb", ranker_cache_mb, "ranker cache in MiB (default: unbounded)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--ranker-backend", o.ranking.backend,
                 "cpu, gpu or auto (gpu where a device is present)")
      ->capture_default_str();
  app.add_option("--ranker-cache-policy", o.ranker_cache_policy,
                 "coordinated (loads and evictions by the aggregator's command) or per-isn-lru")
      ->capture_default_str()
      ->check(CLI::IsMember({"coordinated", "per-isn-lru"}));
  app.add_option("--share-thresholds", o.share_thresholds,
                 "cpu engine, ISNs sharing a node: prune each query against the best k-th score "
                 "any of them has found (a shared-memory window); auto: on where more than one "
                 "ISN runs on the node")
      ->capture_default_str();  // checked at start-up: a bad value is the hello's error
  // An on|off flag into a bool (default: the bool's value).
  auto on_off = [&app](const char* name, bool& value, const char* description) {
    app.add_option_function<std::string>(
           name, [&value](const std::string& s) { value = s == "on"; }, description)
        ->check(CLI::IsMember({"on", "off"}))
        ->default_str(value ? "on" : "off");
  };
  on_off("--share-kth-seeds", o.share_kth_seeds,
         "with --share-thresholds: each shard starts a query from the node's combined K-th "
         "impact bounds (a lower bound of the collection's k-th score), not its own shard's");
  on_off("--share-unions", o.share_unions,
         "with --share-thresholds: the shards also share each query's best scores (up to k = "
         "15), and prune against the k-th of them all, as one engine over the node's documents "
         "would");
  on_off("--share-and-first", o.engine.sharing_and_phases_first,
         "with --share-thresholds, and-or: every query's AND phase before any OR phase, so that "
         "a shard skips an OR phase that the other shards' AND matches make moot");
  on_off("--share-in-order", o.engine.sharing_in_batch_order,
         "with --share-thresholds: the engine's threads take a batch's queries in batch order, "
         "one at a time (a smaller spread between the node's ISNs, more documents scored)");
  app.add_option("--pin-cores", o.pin_cores,
                 "off: the kernel places this ISN's threads; auto: the node's ISNs split the "
                 "process's CPUs into contiguous slices, one each (node-local ISN i of n: slice "
                 "i); a CPU list (0-7,16-23): the node's ISNs split that list the same way")
      ->capture_default_str();  // checked at start-up: a bad value is the hello's error
  app.allow_extras();  // aggregator-only flags passed through by launch/cluster.sh are ignored
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
  o.verify_checksums = !no_verify;
  o.ranking.cache_bytes = std::uint64_t(ranker_cache_mb * 1048576.0);
  if (!run_mode.empty()) {
    try {
      SearchParams p;
      p.mode = parse_mode(run_mode);
      p.scoring = parse_scoring(run_scoring);
      p.k = run_k;
      p.alpha = run_alpha;
      o.prepare_params = p;
    } catch (const std::exception& e) {
      std::cerr << "gpusearch-isn: error: " << e.what() << '\n';
      MPI_Abort(MPI_COMM_WORLD, 2);
    }
  }
  so.scheduling.deadline = std::chrono::milliseconds(deadline_ms);
  so.lbd_short_on = lbd_short_on;
  if (so.train_file.empty() && std::filesystem::exists(o.index_dir / "queries.train.tsv"))
    so.train_file = o.index_dir / "queries.train.tsv";
  // The engine thread never calls MPI; the main thread does it all (isn/isn_server.hpp).
  if (provided < MPI_THREAD_FUNNELED) {
    std::cerr << "gpusearch-isn: error: MPI provides thread level " << provided
              << ", below MPI_THREAD_FUNNELED, which the engine thread needs\n";
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  try {
    o.pacing.mode = wire::parse_progress_mode(progress);
  } catch (const std::exception& e) {
    std::cerr << "gpusearch-isn: error: " << e.what() << '\n';
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  std::unique_ptr<tbb::global_control> limit;
  if (threads > 0)
    limit = std::make_unique<tbb::global_control>(tbb::global_control::max_allowed_parallelism,
                                                  threads);
  int rc = 0;
  try {
    rc = run_isn(o, MPI_COMM_WORLD);
  } catch (const std::exception& e) {
    std::cerr << "gpusearch-isn: error: " << e.what() << '\n';
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  MPI_Finalize();
  return rc;
}
