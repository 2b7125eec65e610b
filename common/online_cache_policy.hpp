// An online GPU list-cache policy (beyond paper 000, whose VFB plan is static; its section 5
// asks for a dynamic one): the cache follows the live query stream. The served queries are
// handed over in batches (observe: cheap, never blocks the engine); a background thread
// replays a sample of them the way the offline planner replays a training log
// (simulate_and_reads: the engine's early-terminating AND), adds their block reads to visiting
// frequencies that decay exponentially with the stream position (half-life half_life_queries
// served queries), and every replan_queries replayed queries admits a new plan with the
// offline policy's admission (admit_lists). The engine takes the newest plan between batches
// (take_plan) and moves its cache toward it, copying at most a bounded number of bytes.
//
// Keeping up with a fast engine: a GPU serves a call of a few thousand queries in a few ms,
// faster than a host replays them. So the queue is bounded and keeps the newest queries (the
// oldest are dropped: under drift they are the least useful), and the thread replays at most
// replan_queries before it plans, so plans come at a steady cadence whatever the backlog
// (before, one pass replayed the whole backlog and planned once, and a fast run ended with one
// plan and thousands of queries pending).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <optional>
#include <span>
#include <thread>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "common/cache_admission.hpp"
#include "common/cache_plan.hpp"
#include "common/query.hpp"

namespace gpusearch {

class ShardIndex;

struct OnlinePolicyOptions {
  CachePolicy policy = CachePolicy::kVfb;
  double lambda = 1.0;
  std::uint64_t budget_bytes = 0;  // the cache region
  unsigned k = 10;                 // of the simulated AND
  Scoring scoring = Scoring::kBm25;
  double half_life_queries = 20000;     // a visit's weight halves after this many served queries
  std::uint64_t replan_queries = 2000;  // a new plan after this many replayed queries
  unsigned sample_every = 1;            // replay one served query of this many
  std::size_t max_pending = 4096;       // queries waiting for the thread; the oldest are dropped
};

class OnlineCachePolicy {
 public:
  OnlineCachePolicy(const ShardIndex& shard, OnlinePolicyOptions options);
  ~OnlineCachePolicy();  // stops and joins the thread
  OnlineCachePolicy(const OnlineCachePolicy&) = delete;
  OnlineCachePolicy& operator=(const OnlineCachePolicy&) = delete;

  // Start-up, before serving (blocks; the caller's thread and TBB): the training log replayed as
  // the stream's past, every query weighing alike and together as much as one half-life of
  // served queries, then a plan from it (take_plan returns it). Not sampled, nothing dropped.
  void seed(std::span<const Query> training);
  // Served queries (copied; sampled; the oldest pending dropped past max_pending). Never waits
  // for the thread.
  void observe(std::span<const Query> queries);
  // The newest plan not yet taken (lists most valuable first), if any.
  std::optional<std::vector<CachedList>> take_plan();
  // Blocks until every query observed so far has been replayed and, if any was replayed since
  // the last plan, a plan made from them is ready (tests, benchmarks).
  void drain();
  nlohmann::json stats() const;

 private:
  struct Pending {
    Query query;
    std::uint64_t position;  // in the served stream
  };
  void run();
  void add_reads(const Query& q, double log2_weight, const std::vector<ListRead>& reads);
  void replay(std::span<const Pending> work);
  std::vector<CachedList> make_plan();
  const ShardIndex& shard_;
  OnlinePolicyOptions options_;
  mutable std::mutex mutex_;
  std::condition_variable wake_, idle_;
  std::deque<Pending> pending_;
  std::optional<std::vector<CachedList>> plan_;
  bool stop_ = false, busy_ = false, plan_requested_ = false;
  std::uint64_t observed_ = 0, sampled_ = 0, dropped_ = 0, replayed_ = 0, plans_ = 0;
  std::uint64_t since_plan_ = 0, last_plan_position_ = 0;
  double replay_seconds_ = 0, plan_seconds_ = 0;
  // Owned by the thread: decayed visits; a visit's weight is 2^((position - base) / half-life),
  // the base moved up now and then (every stored weight rescaled), so older visits weigh less
  // relative to newer ones and doubles never overflow.
  VisitLog visits_;
  double base_position_ = 0, newest_log2_weight_ = 0;
  std::thread thread_;
};

}  // namespace gpusearch
