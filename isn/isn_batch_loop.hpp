// The ISN's batch loop (isn_server.hpp, stages 2 and 3), shared by its two halves: the MPI
// thread's (isn_server.cpp: receiving, control messages, sending, the stats) and the engine
// thread's (isn_engine_thread.cpp: decoding, searching, ranking, encoding). Internal to the ISN
// process: nothing but those two files includes it.
#pragma once

#include <mpi.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <iostream>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/metrics.hpp"
#include "common/shard_index.hpp"
#include "common/wire/handoff_wait.hpp"
#include "common/wire/mpi_transport.hpp"
#include "common/wire/progress_pacer.hpp"
#include "common/wire/wire.hpp"
#include "isn/batch_pipeline.hpp"
#include "isn/cpu_engine/cpu_engine.hpp"
#include "isn/fallback_engine.hpp"
#include "isn/isn_server.hpp"
#include "isn/isn_startup.hpp"
#include "isn/shared_thresholds.hpp"

namespace gpusearch::isn_detail {

using Clock = std::chrono::steady_clock;
using namespace wire;  // within this namespace only

inline std::uint64_t micros(Clock::duration d) {
  return std::uint64_t(std::chrono::duration_cast<std::chrono::microseconds>(d).count());
}

// ---- 2. The batch loop (1, the start-up, is isn_startup.cpp) ------------------------------------

// A batch received by the MPI thread, waiting for the engine thread; decoded already where it
// came while the engine worked (--answer-thread mpi).
struct Inbound {
  Received message;
  Clock::time_point received;
  std::optional<QueryBatch> decoded;
};

// What the engine thread counts; read by the MPI thread only when the engine is idle.
struct EngineCounters {
  std::uint64_t batches = 0, queries = 0, compute_us = 0, unknown_terms = 0, rejected = 0,
                failed_batches = 0, idle_us = 0, encode_us = 0, answer_bytes = 0, queries_by_id = 0;
  QueryCounters work;  // this shard's share of the answers' counters (how even the shards are)
};

// Two threads: this one (the caller's, the only one that calls MPI: MPI_THREAD_FUNNELED)
// receives batches ahead into a queue while the engine works, answers clock pings at once, and
// sends each answer the moment it is encoded. The engine thread resolves, searches and (the
// second stage) ranks one batch after the other, and waits on a condition variable when the
// queue is empty. The decoding of a batch that arrives while the engine works, and the
// encoding of each answer (the hits' external ids, the message), are this thread's
// (--answer-thread mpi, the default): the engine thread hands a searched batch over and takes
// the next at once, as the in-process search does, instead of idling its encoding and its next
// batch's decoding (NOTES-cluster.md, session 49). --answer-thread engine: the engine thread
// decodes and encodes. With the scheduler (--scheduler), the engine thread instead queues
// each batch's jobs as the batch arrives (up to --scheduler-batches-in-flight batches at once,
// isn/batch_pipeline.hpp) and answers the batches in order as their jobs complete.
class BatchLoop {
 public:
  BatchLoop(const IsnOptions& options, const Placement& where, const ShardIndex& shard,
            FallbackEngine& engine, IsnSecondStage* second, const SharedThresholdWindow* thresholds,
            MPI_Comm world)
      : options_(options),
        where_(where),
        shard_(shard),
        engine_(engine),
        second_(second),
        thresholds_(thresholds),
        world_(world),
        pacer_(options.pacing) {
    if (thresholds_) {
      sharing_engine_ = dynamic_cast<cpu::CpuEngine*>(engine_.active_primary());
      if (!sharing_engine_ &&
          (where.share_thresholds == ShareThresholds::kOn || where.local_rank == 0))
        std::cerr << fmt::format(
            "{}: --share-thresholds: not available with this ISN's engine stack ({}{}): only "
            "the plain CPU engine shares thresholds (not --scheduler, a list cache or an "
            "injected fault); each ISN prunes alone\n",
            where.who, engine_.name(), options.scheduler.policy.empty() ? "" : ", --scheduler");
    }
    auto* scheduler = dynamic_cast<SchedulerEngine*>(engine_.active_primary());
    if (scheduler && options.scheduler.batches_in_flight > 1)
      pipeline_ =
          std::make_unique<BatchPipeline>(*scheduler, options.scheduler.batches_in_flight, [this] {
            { std::lock_guard lock(mutex_); }  // the engine thread waits, or sees the change
            engine_wait_.notify_one();
          });
  }

  // Serves batches until a shutdown has been answered with the stats.
  void run();
  // The node's combined K-th impact table (SharedThresholdWindow::combine_seed_tables): the
  // sharing CPU engine's seed table from now on (nothing where this ISN does not share).
  void use_collection_seeds(std::shared_ptr<const KthImpactTable> seeds) {
    if (!sharing_engine_) return;
    sharing_engine_->set_collection_seeds(seeds);
    collection_seeds_ = std::move(seeds);
  }

 private:
  void engine_thread_main();
  void pipelined_engine_thread_main();
  // Decodes and resolves a batch (nullptr: rejected); then one of: answers it now, or queues
  // its jobs in the pipeline; and sends an answered batch.
  std::unique_ptr<PipelinedBatch> open_batch(Inbound in, Clock::time_point idle_since);
  void search_now(PipelinedBatch& b);
  // --inject-compute-ms: an engine call that started at `started` for `batches` batches lasts
  // at least that many times the option.
  void pad_compute(Clock::time_point started, std::size_t batches) const;
  // Searches the opened batches: runs of them with equal parameters (one stage, no threshold
  // sharing) in one engine call, the others one by one.
  void search_joined(std::vector<std::unique_ptr<PipelinedBatch>>& open);
  // The second stage of a batch whose first stage is done: first the ranker-cache commands the
  // aggregator sent for it (and any for batches this ISN never got), then the ranking. Throws
  // what the ranking throws (a bad ranker does not: its queries keep the first stage).
  void rank_batch(PipelinedBatch& b);
  void apply_ranker_commands(std::uint64_t batch_id);
  // The answer's message: the hits' external ids, the encoding, and the counters (the thread
  // that encodes answers owns counters_' answer fields).
  std::shared_ptr<const OutgoingMessage> encode_answer(PipelinedBatch& b);
  // The engine thread's: encodes the answer and queues it for the MPI thread to post.
  void send_answer(PipelinedBatch& b);
  // The MPI thread's (--answer-thread mpi): encodes the searched batches the engine thread
  // handed over and posts their answers; returns whether there were any.
  bool send_searched(std::deque<std::unique_ptr<PipelinedBatch>>& searched,
                     std::deque<PendingSend>& sends, std::deque<Clock::time_point>& posted);
  std::vector<Query> resolve_batch(QueryBatch& batch);
  // Takes every waiting message; returns whether there was any.
  bool receive_messages();
  void on_control(const Received& m, Clock::time_point received);
  nlohmann::json stats() const;
  // Whether a batch with these parameters goes through the sharing engine.
  bool can_share(const SearchParams& params) const;
  // Appends b's queries' slots to slots_.
  void add_slots(const PipelinedBatch& b);
  // The sharing engine answers `queries` with slots_; where it throws, the ISN fails over and
  // its fallback answers them. Returns whether the sharing engine answered.
  bool search_sharing(std::span<const Query> queries, const SearchParams& params,
                      std::span<ShardResult> results);
  nlohmann::json cpu_seconds() const;

  const IsnOptions& options_;
  const Placement& where_;
  const ShardIndex& shard_;
  FallbackEngine& engine_;
  IsnSecondStage* second_;  // null: one stage
  // --share-thresholds: the node's slots, and the CPU engine that uses them (null: not sharing).
  const SharedThresholdWindow* thresholds_;
  cpu::CpuEngine* sharing_engine_ = nullptr;
  std::shared_ptr<const KthImpactTable> collection_seeds_;  // use_collection_seeds
  // The engine thread's: the slots of an engine call's queries, and one batch's.
  std::vector<cpu::QueryThresholdSlots> slots_, batch_slots_;
  std::uint64_t batches_shared_ = 0;
  std::uint64_t joint_calls_ = 0, batches_joined_ = 0;  // --coalesce-batches
  MPI_Comm world_;
  ProgressPacer pacer_;
  // Where the ISN's CPU goes from run()'s start (stats' cpu_seconds): the process, this (MPI)
  // thread, and the engine thread (its native handle, read while it runs).
  double process_cpu_at_run_ = 0, mpi_cpu_at_run_ = 0, mpi_run_delay_at_run_ = 0;
  Clock::time_point run_started_;
  unsigned long engine_thread_handle_ = 0;
  // The engine thread's (read by stats() once it idles): the process's CPU seconds during its
  // engine calls, and their wall seconds.
  double engine_call_cpu_seconds_ = 0, engine_call_seconds_ = 0;

  // Shared between the MPI thread and the engine thread, under mutex_.
  std::mutex mutex_;
  std::condition_variable work_ready_;
  // How the engine thread waits for work: polling for --spin-us after each batch (--handoff hot:
  // just in time, the next batch comes tens of microseconds after the answer), else asleep.
  HandoffWait engine_wait_{mutex_, work_ready_, options_.pacing.handoff_hot(),
                           std::chrono::microseconds(options_.pacing.spin_us)};
  std::deque<Inbound> inbox_;
  // Ranker-cache commands by the batch they prepare; received before that batch (MPI keeps
  // the aggregator's order), applied by the engine thread just before it ranks it.
  std::deque<RankerCacheCommand> ranker_commands_;
  // Answers encoded and waiting for the MPI thread to post them, with when they were ready.
  struct ReadyAnswer {
    std::shared_ptr<const OutgoingMessage> message;
    Clock::time_point ready;
  };
  std::deque<ReadyAnswer> outbox_;
  // --answer-thread mpi: batches searched by the engine thread, for the MPI thread to encode and
  // send (in order).
  std::deque<std::unique_ptr<PipelinedBatch>> searched_;
  // The answers' first segments: back when their send completes (MPI thread), zeroed there,
  // taken again by the next encode (the encoding thread) without an allocation or page faults.
  std::shared_ptr<wire::SegmentPool> answer_segments_ = std::make_shared<wire::SegmentPool>();
  bool stop_ = false, engine_busy_ = false;
  Clock::time_point busy_since_{};
  double compute_ewma_us_ = 0;  // the engine's time per batch, to predict when it needs the next
  std::unique_ptr<BatchPipeline> pipeline_;  // --scheduler with batches in flight, else null

  // The engine thread's, but for `rejected` (also the MPI thread's) and, with --answer-thread
  // mpi, the fields that encode_answer counts (the MPI thread's then).
  EngineCounters counters_;
  // The encoding thread's, reused per answer: each query's first hit, and the hits' external ids.
  std::vector<std::size_t> answer_hit_at_;
  std::vector<std::string_view> answer_ids_;
  // The engine thread's: ranker-cache commands applied, and loads they asked for that failed.
  std::uint64_t ranker_commands_applied_ = 0, ranker_command_load_failures_ = 0;
  std::vector<std::string> ranker_command_errors_;  // the first few

  // The MPI thread's.
  // When batches arrive: the next is due about one gap after the last (a quarter early, for the
  // variance), unless none has come for three gaps (the aggregator is idle or done).
  Clock::time_point last_batch_at_{};
  std::uint64_t batches_decoded_ahead_ = 0;  // --answer-thread mpi: decoded while the engine worked
  double batch_gap_us_ = 0;
  // A stats request or a shutdown: answered once every batch received before it is sent.
  bool stats_wanted_ = false, shutdown_wanted_ = false;
  // An answer's way out (us): from encoded to its send posted (the MPI thread's reaction, on a
  // busy node behind other processes' workers; with --answer-thread mpi from the search's end,
  // the encoding included), and from posted to complete as this thread's
  // MPI_Test sees it (the transfer, with Open MPI's rendezvous above the eager limit).
  metrics::SampleSet answer_post_us_, answer_send_us_;
  // encode_answer's parts (us): from the search's end to the encoding's start (the hand-off to
  // the MPI thread, with --answer-thread mpi), the hits' external-id look-ups, and the packing.
  metrics::SampleSet answer_pickup_us_, answer_lookup_us_, answer_pack_us_;
};

}  // namespace gpusearch::isn_detail
