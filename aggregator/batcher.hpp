// Forms query batches by size and by wait time; with cost buckets (paper 003, section on
// bucketing by shortest-list length) a batch holds the oldest waiting query and the waiting
// queries closest to it in cost, so one long query does not hold back a batch of short ones
// and no query waits behind newer ones forever.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <string>
#include <vector>

namespace gpusearch {

using AggregatorClock = std::chrono::steady_clock;

struct PendingQuery {
  std::string id;
  std::vector<std::string> terms;  // normalized, in scoring order
  std::vector<std::uint32_t> term_ids;  // the same terms as global vocabulary IDs
  std::uint64_t sequence = 0;      // arrival order among answered queries (the run file's order)
  std::string cache_key;
  double cost = 0;  // shortest posting list (df) of its terms
  AggregatorClock::time_point arrival;
};

struct BatchPolicy {
  std::size_t batch_size = 64;
  std::uint64_t max_wait_us = 2000;
  bool cost_buckets = false;
};

class Batcher {
 public:
  explicit Batcher(BatchPolicy policy) : policy_(policy) {}
  void add(PendingQuery q) { pending_.push_back(std::move(q)); }
  std::size_t size() const { return pending_.size(); }
  bool empty() const { return pending_.empty(); }
  AggregatorClock::time_point oldest_arrival() const { return pending_.front().arrival; }
  // A batch is due when batch_size queries wait, when the oldest has waited max_wait_us, or
  // (flush) when no more queries will come.
  bool due(AggregatorClock::time_point now, bool flush) const;
  // Takes the next batch (at most batch_size queries).
  std::vector<PendingQuery> cut();

 private:
  BatchPolicy policy_;
  std::deque<PendingQuery> pending_;  // arrival order
};

}  // namespace gpusearch
