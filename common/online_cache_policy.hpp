// An online GPU list-cache policy (beyond paper 000, whose VFB plan is static; its section 5
// asks for a dynamic one): the cache follows the live query stream. The served queries are
// handed over in batches (observe: cheap, never blocks the engine); a background thread
// replays a sample of them the way the offline planner replays a training log
// (simulate_and_reads: the engine's early-terminating AND), adds their block reads to visiting
// frequencies that decay exponentially with the number of queries seen since (half-life
// half_life_queries), and every replan_queries sampled queries admits a new plan with the
// offline policy's admission (admit_lists). The engine takes the newest plan between batches
// (take_plan) and moves its cache toward it, copying at most a bounded number of bytes.
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
  double half_life_queries = 20000;     // a visit's weight halves after this many sampled queries
  std::uint64_t replan_queries = 2000;  // a new plan after this many sampled queries
  unsigned sample_every = 1;            // replay one query of this many
  std::size_t max_pending = 100000;     // queries waiting for the thread; more are dropped
};

class OnlineCachePolicy {
 public:
  OnlineCachePolicy(const ShardIndex& shard, OnlinePolicyOptions options);
  ~OnlineCachePolicy();  // stops and joins the thread
  OnlineCachePolicy(const OnlineCachePolicy&) = delete;
  OnlineCachePolicy& operator=(const OnlineCachePolicy&) = delete;

  // Served queries (copied; sampled; dropped when the thread is max_pending behind).
  void observe(std::span<const Query> queries);
  // The newest plan not yet taken (lists most valuable first), if any.
  std::optional<std::vector<CachedList>> take_plan();
  // Blocks until every query observed so far has been replayed and, if any was replayed since
  // the last plan, a plan made from them is ready (tests, benchmarks, a seeded start).
  void drain();
  nlohmann::json stats() const;

 private:
  void run();
  void add_reads(const Query& q, const std::vector<ListRead>& reads);
  std::vector<CachedList> make_plan();
  const ShardIndex& shard_;
  OnlinePolicyOptions options_;
  mutable std::mutex mutex_;
  std::condition_variable wake_, idle_;
  std::deque<Query> pending_;
  std::optional<std::vector<CachedList>> plan_;
  bool stop_ = false, busy_ = false, plan_requested_ = false;
  std::uint64_t observed_ = 0, sampled_ = 0, dropped_ = 0, plans_ = 0, since_plan_ = 0;
  // Owned by the thread: decayed visits; a visit's weight is 2^(sampled / half-life), rescaled
  // now and then, so older visits weigh less relative to newer ones.
  VisitLog visits_;
  double log2_weight_ = 0;
  std::thread thread_;
};

}  // namespace gpusearch
