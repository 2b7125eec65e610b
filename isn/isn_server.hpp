// The ISN process (ranks 1..N of the cluster), in three stages (isn_startup.cpp, then the batch
// loop of isn_batch_loop.hpp: its engine thread in isn_engine_thread.cpp, its MPI thread and
// the stats in isn_server.cpp):
//  1. start-up and hello: find its place on the node (rank, node-local rank, GPU ordinal), open
//     shard rank-1 of the index, build the engine stack (isn/isn_engine_stack.hpp), and say
//     hello to the aggregator (shard, docID range, memory) or tell it what failed;
//  2. the batch loop: answer query batches, each with its compute time, until told to stop;
//  3. shutdown and stats: once every batch received before a stats request or a shutdown is
//     answered, the counters go back to the aggregator.
//
// Two threads: the main thread is the only one that calls MPI (MPI_THREAD_FUNNELED): it
// receives batches ahead into a queue while the engine works, answers clock pings at once, and
// sends each answer the moment the engine thread has encoded it. The engine thread decodes,
// resolves, searches and encodes, one batch after the other, and waits on a condition variable
// when the queue is empty. How the main thread waits between polling rounds is the pacer's
// business (common/wire/progress_pacer.hpp, --progress).
#pragma once

#include <mpi.h>

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

#include "common/wire/progress_pacer.hpp"
#include "isn/engine_factory.hpp"
#include "isn/isn_engine_stack.hpp"
#include "isn/ranker/ranking_options.hpp"
#include "isn/shared_thresholds.hpp"

namespace gpusearch {

// The engine an ISN runs when --engine is not given, and the CPU engine it falls back to when
// that one fails (e.g. the GPU engine on a CUDA error): the fast CPU engine.
inline constexpr const char* kDefaultIsnEngine = "cpu";
inline constexpr const char* kFallbackEngineName = "cpu";

struct IsnOptions {
  std::filesystem::path index_dir;
  EngineOptions engine;
  std::string fallback_engine = kFallbackEngineName;
  bool verify_checksums = true;
  // --id-table: the hits' external ids looked up in a copy in huge pages (OpenOptions::
  // external_ids_in_huge_pages), not in the shard's mapped files.
  bool id_table_in_huge_pages = true;
  unsigned gpus_per_isn = 1;     // more than the node has: refused at start, naming the flag
  IsnSchedulerOptions scheduler;  // --scheduler and its options
  // The run's search parameters where known at start-up (--mode, --k, --scoring, --alpha, as
  // the aggregator is given them): the engine's start-up work (the scheduler's predictor) is
  // done on them before the hello. alpha NaN: the index's.
  std::optional<SearchParams> prepare_params;
  std::size_t parallel_chunk_queries = 4;  // ParallelBatchEngine's chunk
  // Batches waiting in the ISN's queue when the engine frees up join one engine call, up to
  // this many (1: one call per batch), where they share their search parameters: a backed-up
  // queue is worked off in larger calls (the GPU engine's fixed cost per call is paid once).
  unsigned coalesce_batches = 4;
  // Which thread encodes each answer and decodes a batch that arrives while the engine works:
  // the MPI thread (--answer-thread mpi, the default), so that the engine thread goes from one
  // batch's search straight to the next one's; or the engine thread itself (--answer-thread
  // engine, as before issue 16's session 49), which then idles its encoding and decoding
  // (0.06 ms of each 0.8 ms GPU batch of 64 on the H100 host) even when the next batch waits.
  // The scheduler's pipeline (--scheduler-batches-in-flight > 1) encodes on its engine thread.
  bool answers_on_mpi_thread = true;
  // Test hooks.
  std::uint64_t inject_engine_fault_at_batch = 0;  // any engine fails from this batch; 0: never
  unsigned inject_delay_ms = 0;                 // sleep before each batch
  int inject_delay_rank = -1;                   // the rank that sleeps; -1: every ISN
  // Test: each batch's engine call lasts at least this long (a sleep counted as compute), so
  // that a test sees a known compute time on any machine.
  unsigned inject_compute_ms = 0;
  int inject_compute_rank = -1;  // the rank whose compute is padded; -1: every ISN
  wire::ProgressOptions pacing;  // how the MPI thread waits (--progress)
  // The second stage (issue 12): store_dir, cache_bytes and backend are used here; a batch
  // brings its candidates and each query's ranker.
  ranker::RankingOptions ranking;
  std::string ranker_cache_policy = "coordinated";  // or per-isn-lru
  // The node's ISNs share each query's running k-th score (isn/shared_thresholds.hpp); auto:
  // where more than one ISN runs on the node and the engine is the CPU engine.
  std::string share_thresholds = "auto";  // on, off or auto (parse_share_thresholds)
  // Sharing: every shard seeds a query from the node's combined K-th impact bounds.
  bool share_kth_seeds = true;
  // --share-unions: with shared thresholds, each query's slots also keep the best scores any
  // shard has found (ThresholdSlot::publish), whose k-th raises the threshold.
  bool share_unions = true;
  // --pin-cores: off (the kernel places the threads), auto (node-local ISN i of n: the i-th of
  // n slices of the process's CPUs) or a CPU list the node's ISNs split the same way.
  std::string pin_cores = "off";
};

// Runs the ISN on `world` (rank 0 is the aggregator). Collective with run_aggregator's start
// (MPI_Comm_split). Returns the process exit code.
int run_isn(const IsnOptions& options, MPI_Comm world);

}  // namespace gpusearch
