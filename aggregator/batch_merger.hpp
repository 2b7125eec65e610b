// The aggregator's merge thread: decodes the results of each completed batch, merges each query's
// per-shard answers (aggregator/kway_merge.hpp; the in-process merge_shard_results' rule), fills
// the result cache, and hands every answer to the run writer's thread, which writes them in
// arrival order (aggregator/run_writer_thread.hpp): off the MPI thread's receive path and off the
// merge's. It also keeps each batch's stage times and timeline entry, and the latency model the
// pipeline depth is chosen from.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <optional>
#include <ostream>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "aggregator/arrival_order_writer.hpp"
#include "aggregator/in_flight_batches.hpp"
#include "aggregator/isn_roster.hpp"
#include "aggregator/kway_merge.hpp"
#include "aggregator/packed_answers.hpp"
#include "aggregator/pipeline_depth_model.hpp"
#include "aggregator/query_source.hpp"
#include "aggregator/result_cache.hpp"
#include "aggregator/run_writer_thread.hpp"
#include "common/metrics.hpp"
#include "common/progress.hpp"
#include "common/search_result.hpp"
#include "common/thread_placement.hpp"
#include "common/wire/handoff_wait.hpp"
#include "common/wire/result_view.hpp"

namespace gpusearch {

// A result cache shared by admission (look-ups, MPI thread) and the merger (inserts).
struct SharedResultCache {
  explicit SharedResultCache(std::size_t entries) : cache(entries) {}
  bool enabled() const { return cache.enabled(); }
  std::optional<CachedAnswer> find(const std::string& key) {
    std::lock_guard lock(mutex);
    return cache.find(key);
  }
  void insert(const std::string& key, const CachedAnswer& a) {
    std::lock_guard lock(mutex);
    cache.insert(key, a);
  }
  std::mutex mutex;
  ResultCache cache;
};

// What the merge thread gets: a completed batch, or a query answered at admission (result
// cache, no known term) that only needs its place in the run file.
struct MergeJob {
  std::optional<InFlightBatch> batch;
  std::uint64_t sequence = 0;
  std::uint64_t ticket = 0;
  std::string qid;
  CachedAnswer answer;
  AggregatorClock::time_point arrival, answered;
};

// One batch of the metrics' timeline (ms since the run started, on the aggregator's clock),
// kept as numbers on the merge thread's path and made JSON at the end (timeline_json).
struct TimelineBatch {
  struct Isn {
    double received, start, end, encoded, arrived;
  };
  std::uint64_t batch = 0;
  std::size_t queries = 0, bytes_sent = 0;
  double cut = 0, encoded = 0, sent = 0, complete = 0, merge_start = 0, merged = 0;
  std::optional<double> sends_done;     // unset: the sends had not all completed
  std::vector<std::optional<Isn>> isn;  // by ISN (rank - 1); unset: its answer never came
};
nlohmann::json timeline_json(const std::vector<TimelineBatch>& timeline);

// Everything the merge thread measured; read after stop().
struct MergeStats {
  std::uint64_t answered = 0, empty_results = 0, answered_by_or = 0, partial_answers = 0,
                hits_written = 0, batches_with_misses = 0;
  std::uint64_t ranker_fallbacks = 0;  // answers with some shard's first stage (ranker failed)
  QueryCounters counters;
  // Bounded for runs of any length (serving): exact up to metrics::SampleSet's limit.
  metrics::SampleSet latency_ms, broadcast_ms, round_trip_ms, compute_ms, gather_ms, merge_ms,
      isn_idle_ms, batch_sizes, to_isn_ms, isn_queue_ms, isn_encode_ms, from_isn_ms, merge_wait_ms,
      decode_ms, overhead_ms;
  std::vector<TimelineBatch> timeline;
};

class BatchMerger {
 public:
  struct Setup {
    std::ostream* run = nullptr;
    std::string run_tag;
    std::size_t timeline_batches = 0;
    AggregatorClock::time_point t_run;  // the timeline's zero
    std::string me;
    QuerySource* source = nullptr;  // told each answer of a query with a ticket
    ThreadPlacement placement;      // of the merge thread (--rpc-thread's CPU)
    // The model's compute_aim_us: this quantile of the slowest ISN's compute over the last
    // SlidingQuantile::kWindow batches (0: none, the cut aims at the mean).
    double aim_quantile = 0;
    // --handoff: the merge thread polls while the MPI thread expects answers (expect_answers).
    bool hot_handoff = false;
    // The model's compute_early_us (--admission-ahead): this low quantile of the same window
    // (0: none).
    double early_quantile = 0;
  };
  // `on_done` runs on the merge thread after each job (the MPI thread's window has room again).
  BatchMerger(Setup setup, IsnRoster& isns, SharedResultCache& cache, Progress& bar,
              std::function<void()> on_done);
  ~BatchMerger();  // stops the thread

  // A completed batch, or an answer known at admission (`answer` of query `sequence`).
  void submit(InFlightBatch&& batch);
  void submit_answer(std::uint64_t sequence, std::uint64_t ticket, std::string qid,
                     CachedAnswer answer, AggregatorClock::time_point arrival);
  // The MPI thread: the oldest batch's answers are due from `from`, worth hot polling until
  // `until` (Clock::time_point::max(), min(): none expected). The merge thread polls then,
  // not from a condition variable's wake-up (common/wire/handoff_wait.hpp).
  void expect_answers(AggregatorClock::time_point from, AggregatorClock::time_point until) {
    handoff_.expect(from, until);
  }
  nlohmann::json handoff_stats() const { return handoff_.stats(); }
  // The merge thread's CPU seconds, once stop() has joined it.
  double thread_cpu_seconds() const { return thread_cpu_seconds_; }
  // Queries handed over and not yet written.
  std::size_t queries() const { return merging_queries_; }
  // Rethrows what made the merge thread fail, if anything did.
  void rethrow_if_failed();
  // Finishes every job, joins the thread, rethrows its failure.
  void stop();
  LatencyModel model() const;

  const MergeStats& stats() const { return stats_; }
  // The run file's ordering writer (its counts are final after stop()).
  const ArrivalOrderWriter& writer() const { return writer_.order(); }

 private:
  void push(MergeJob job);
  void loop();
  void merge(InFlightBatch& b);
  // `hits` go to the run writer (copied); `owned` (the same answer with owned ids) is needed
  // only when the query has a ticket, for the source's answered().
  void record_answer(std::uint64_t seq, std::uint64_t ticket, const std::string& qid,
                     std::span<const HitView> hits, const CachedAnswer* owned, bool partial,
                     AggregatorClock::time_point arrival, AggregatorClock::time_point at);
  double rel_ms(AggregatorClock::time_point t) const;

  Setup setup_;
  IsnRoster& isns_;
  SharedResultCache& cache_;
  Progress& bar_;
  std::function<void()> on_done_;
  RunWriterThread writer_;
  PackedAnswers to_write_;              // the current job's answers (merge thread)
  MergedHits merged_;                   // the query being merged (capacity reused)
  std::vector<HitView> admitted_hits_;  // an answer known at admission, as views
  // Each ISN's answer to the batch being merged, as views into its message (capacity reused).
  std::vector<wire::ResultBatchView> decoded_;
  MergeStats stats_;
  mutable std::mutex model_mutex_;
  LatencyModel model_;
  SlidingQuantile compute_window_;  // the slowest ISN's compute per batch (guarded by model_mutex_)
  AggregatorClock::time_point previous_last_answer_{};
  std::atomic<std::size_t> merging_queries_{0};
  std::mutex mutex_;
  std::condition_variable ready_;
  wire::HandoffWait handoff_{mutex_, ready_, setup_.hot_handoff, std::chrono::microseconds(0)};
  std::deque<MergeJob> queue_;
  bool stop_ = false;
  std::exception_ptr error_;
  double thread_cpu_seconds_ = 0;  // written by the merge thread as it ends
  std::thread thread_;
};

}  // namespace gpusearch
