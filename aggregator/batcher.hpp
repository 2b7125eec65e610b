// Forms query batches by size and by wait time; with cost buckets (paper 003, section on
// bucketing by shortest-list length) a batch holds the oldest waiting query and the waiting
// queries closest to it in cost, so one long query does not hold back a batch of short ones
// and no query waits behind newer ones forever. A batch holds queries of one SearchParams (mode,
// k, scoring: the ISNs run a batch under one), the oldest query's. SLA-driven cuts: a query
// with a deadline makes its batch due once waiting longer would leave less than the expected
// service time (broadcast, the slowest ISN, merge) before that deadline.
//
// Grouping by ranker (--ranker-cache-policy coordinated, issue 12): the batch still holds the
// oldest (or most urgent) query, so that no query waits for more cuts than there are queries
// ahead of it in the admission window; the rest of the batch is filled with the waiting
// queries of the rankers already chosen, then of more rankers (resident ones first, then those
// with most queries waiting), as long as the batch's rankers fit the ISNs' ranker cache
// together. Only which batch a query travels in changes: every answer is the same, and the run
// file keeps arrival order (aggregator/arrival_order_writer.hpp).
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "common/search_result.hpp"

namespace gpusearch {

using AggregatorClock = std::chrono::steady_clock;

// Milliseconds from a to b.
inline double ms_between(AggregatorClock::time_point a, AggregatorClock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

struct PendingQuery {
  std::string id;
  std::vector<std::string> terms;  // normalized, in scoring order
  std::vector<std::uint32_t> term_ids;  // the same terms as global vocabulary IDs
  std::uint64_t sequence = 0;      // arrival order among answered queries (the run file's order)
  std::string cache_key;
  double cost = 0;  // shortest posting list (df) of its terms
  AggregatorClock::time_point arrival;
  SearchParams params;  // a batch holds queries of equal params
  // The answer is due by then (an RPC request's deadline); max(): none.
  AggregatorClock::time_point deadline = AggregatorClock::time_point::max();
  std::uint64_t ticket = 0;  // the query source's handle for its answer (0: none)
  std::string ranker;        // second-stage ranker ("" : none)
};

class RankerCacheCoordinator;

struct BatchPolicy {
  std::size_t batch_size = 64;
  std::uint64_t max_wait_us = 2000;
  bool cost_buckets = false;
};

class Batcher {
 public:
  explicit Batcher(BatchPolicy policy) : policy_(policy) {}
  void add(PendingQuery q) {
    if (!q.ranker.empty()) ++waiting_[q.ranker];  // only a second stage's rankers are asked for
    pending_.push_back(std::move(q));
  }
  // Cut batches grouped by ranker within the cache `coordinator` plans (null: arrival order).
  // It takes the place of cost buckets.
  void group_by_ranker(const RankerCacheCoordinator* coordinator) { coordinator_ = coordinator; }
  // Whether a waiting query uses this ranker.
  bool waiting_for(std::string_view ranker) const {
    const auto it = waiting_.find(std::string(ranker));
    return it != waiting_.end() && it->second > 0;
  }
  std::size_t size() const { return pending_.size(); }
  bool empty() const { return pending_.empty(); }
  AggregatorClock::time_point oldest_arrival() const { return pending_.front().arrival; }
  // A batch is due when batch_size queries wait, when the oldest has waited max_wait_us, when a
  // query's deadline leaves no more than the expected service time (set_service_time), or
  // (flush) when no more queries will come.
  bool due(AggregatorClock::time_point now, bool flush) const;
  // When a batch becomes due by time (wait or deadline); max() when nothing waits.
  AggregatorClock::time_point next_due() const;
  // What a batch is expected to take from its cut to its merged answers.
  void set_service_time(AggregatorClock::duration d) { service_ = d; }
  // Takes the next batch: at most batch_size queries with the oldest query's params; the
  // oldest query's, or (SLA) the query of the nearest deadline's, when that one is due.
  std::vector<PendingQuery> cut();
  std::uint64_t deadline_cuts() const { return deadline_cuts_; }

 private:
  std::size_t most_urgent() const;  // index of the nearest deadline; size() when none
  // Marks in `take` the anchor and candidates grouped by ranker (see the header comment).
  void take_by_ranker(const std::vector<std::size_t>& candidates, std::size_t n,
                      std::vector<bool>& take) const;
  BatchPolicy policy_;
  const RankerCacheCoordinator* coordinator_ = nullptr;
  std::unordered_map<std::string, std::size_t> waiting_;  // queries waiting per ranker
  std::deque<PendingQuery> pending_;  // arrival order
  AggregatorClock::duration service_{};
  std::uint64_t deadline_cuts_ = 0;
};

}  // namespace gpusearch
