// The admission's per-query work: a batch's arrived query texts resolved against the vocabulary
// (the dictionary's look-ups, then each term's df for the query's cost), on the MPI thread alone
// or with helper threads of the resolver's own. Just in time every query of a batch waits for the
// whole batch's admission: at batch 64 that was 0.075 ms of the GPU engine's 0.22 ms between p50
// and compute (H100 host, session 50), and at batch 1,024 the next batch's admission follows the
// first ISN's answer on the cycle's critical path (1.4-1.6 ms of a 15-17 ms cycle on the H200
// host, session 43). What is left in the admission loop (sequence numbers, the result cache, the
// batcher) stays on the MPI thread in arrival order.
//
// Why helpers of its own, not a oneTBB arena: a batch of 64 resolves in about 0.06 ms, less than
// it takes to wake a sleeping thread, and oneTBB's workers sleep in the 0.7 ms between batches
// (two arena threads did not lower the GPU engine's p50 on the H100 host: 1.31 of compute
// against 1.26, session 50). The aggregator knows when the next batch is due (`expect_batch_at`,
// just in time): the helpers wake shortly before and poll until it comes, so that none is woken on
// the batch's critical path. A batch is cut into chunks that the MPI thread and whichever helpers
// are awake claim one by one; the MPI thread never waits for a helper to wake, only for a chunk
// a helper has started.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <limits>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "aggregator/query_source.hpp"
#include "common/query.hpp"

namespace gpusearch {

class TermDictionary;

struct ResolvedQuery {
  bool ok = false;  // false: `problem` says why the query cannot run
  Query query;
  QueryProblem problem;
  double cost = std::numeric_limits<double>::max();  // the smallest df of its terms
};

class AdmissionResolver {
 public:
  using Clock = std::chrono::steady_clock;
  // A chunk, the unit a thread claims: its own prefetch rounds need a few dozen look-ups to
  // overlap their misses.
  static constexpr std::size_t kMinQueriesPerThread = 32;
  // The helpers wake this long before the expected batch (their timer slack is 1 us; the
  // wake-up itself runs late by some microseconds) and poll until it comes, or until kGiveUp
  // after its expected time (a late batch: its answers came late), then sleep again. With a
  // 60 us lead a helper polled 74 us a batch of 64 (H200 host, session 51).
  static constexpr auto kWakeLead = std::chrono::microseconds(30);
  static constexpr auto kGiveUp = std::chrono::microseconds(400);
  // A sleeping helper is woken to re-plan only when the expected batch moved earlier than this
  // past its planned wake-up (the aggregator's prediction moves a little every round).
  static constexpr auto kReplanSlack = std::chrono::microseconds(20);
  // --admission-threads auto: how many threads resolve a batch of `batch_size` queries on a
  // machine of `cores` usable cores. Below 128 queries 1: at batch 64 one helper cut a query's
  // wait for its batch's cut by up to 30 us (H200 host, session 51, polling by sched_yield; H100
  // host, session 52, polling with pauses), but the p50 fell in one order of the runs only
  // (session 52: 0.95-0.97 against 0.97-1.02 ms with the default run first, 0.91-0.92 against
  // 0.87-0.90 with the helper first, when the ISN computed 17-45 us longer beside it).
  // `--admission-threads 2` runs it. From 128 on, a quarter of the cores, at most 4: the ISNs
  // keep the rest, and a 2-core machine keeps one (there 4 threads took the ISNs' cores, session
  // 45). At batch 1,024 on 16 cores 4 threads gained 3-7% (sessions 45, 50).
  static unsigned auto_threads(std::size_t batch_size, std::size_t cores);
  // `threads` 1: the caller's thread only (no helpers); n: the caller and n - 1 helpers.
  // The query's cost: the smallest df_global of its terms, from the dictionary.
  AdmissionResolver(const TermDictionary& dictionary, QueryLimits limits, unsigned threads);
  ~AdmissionResolver();
  AdmissionResolver(const AdmissionResolver&) = delete;
  AdmissionResolver& operator=(const AdmissionResolver&) = delete;

  // The next resolve() is expected at `at` (just in time: the next batch's admit_at). Cheap
  // (an atomic store): call it every round; a helper asleep past the new lead is woken.
  void expect_batch_at(Clock::time_point at);
  // out[i] for arrived[i] (out is resized): exactly what resolve_query gives, with the cost.
  // Rethrows what a helper's part threw.
  void resolve(std::span<const ArrivedQuery> arrived, const std::string& source_name,
               std::vector<ResolvedQuery>& out);
  unsigned threads() const { return threads_; }

  // What the helpers did (the metrics' admission.helpers): resolve() calls split into chunks,
  // chunks the helpers took, and the time the helpers polled for a batch.
  struct HelperStats {
    std::uint64_t split_batches = 0, chunks = 0, helper_chunks = 0, batches_helped = 0;
    double helper_poll_seconds = 0;  // summed over the helpers
    std::uint64_t helper_wakeups = 0;
  };
  HelperStats helper_stats() const;

 private:
  void resolve_range(std::span<const ArrivedQuery> arrived, const std::string& source_name,
                     ResolvedQuery* out) const;
  // Claims and resolves chunks of the open job until none is left; returns how many it took.
  std::size_t work_on_job();
  void helper_loop();
  void stop_helpers();  // stops and joins every helper started

  const TermDictionary& dictionary_;
  QueryLimits limits_;
  unsigned threads_;

  // The job: one resolve() call's chunks. Written by the MPI thread before it opens the job
  // (job_epoch_ odd: open), read by helpers that joined while it was open.
  struct Job {
    std::span<const ArrivedQuery> arrived;
    const std::string* source_name = nullptr;
    ResolvedQuery* out = nullptr;
    std::size_t chunk = 0, chunks = 0;
    std::atomic<std::size_t> next{0}, done{0};
    std::atomic<std::size_t> helper_chunks{0};
    std::mutex error_mutex;
    std::exception_ptr error;
  } job_;
  std::atomic<std::uint64_t> job_epoch_{0};  // odd: a job is open
  std::atomic<unsigned> joined_{0};          // helpers inside the open job
  std::atomic<Clock::rep> expected_at_{Clock::time_point::max().time_since_epoch().count()};
  std::atomic<bool> stop_{false};
  std::atomic<unsigned> sleeping_{0};  // helpers in a condition-variable wait
  std::atomic<Clock::rep> sleep_until_{Clock::time_point::max().time_since_epoch().count()};
  std::mutex sleep_mutex_;
  std::condition_variable wake_;
  std::atomic<std::uint64_t> poll_ns_{0}, wakeups_{0};
  HelperStats stats_;  // the MPI thread's part
  std::vector<std::thread> helpers_;
};

}  // namespace gpusearch
