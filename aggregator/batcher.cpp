#include "aggregator/batcher.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace gpusearch {

bool Batcher::due(AggregatorClock::time_point now, bool flush) const {
  if (pending_.empty()) return false;
  if (flush || pending_.size() >= policy_.batch_size) return true;
  return now - pending_.front().arrival >= std::chrono::microseconds(policy_.max_wait_us);
}

std::vector<PendingQuery> Batcher::cut() {
  const std::size_t n = std::min(policy_.batch_size, pending_.size());
  std::vector<PendingQuery> batch;
  batch.reserve(n);
  if (!policy_.cost_buckets || pending_.size() <= n) {
    for (std::size_t i = 0; i < n; ++i) batch.push_back(std::move(pending_[i]));
    pending_.erase(pending_.begin(), pending_.begin() + std::ptrdiff_t(n));
    return batch;
  }
  // Cost on a log scale: list lengths span orders of magnitude.
  const double anchor = std::log1p(pending_.front().cost);
  std::vector<std::size_t> order(pending_.size() - 1);
  std::iota(order.begin(), order.end(), std::size_t(1));
  auto distance = [&](std::size_t i) { return std::abs(std::log1p(pending_[i].cost) - anchor); };
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return distance(a) < distance(b); });
  std::vector<bool> take(pending_.size(), false);
  take[0] = true;
  for (std::size_t i = 0; i + 1 < n; ++i) take[order[i]] = true;
  std::deque<PendingQuery> rest;
  for (std::size_t i = 0; i < pending_.size(); ++i)
    (take[i] ? batch.emplace_back(std::move(pending_[i]))
             : rest.emplace_back(std::move(pending_[i])));
  pending_ = std::move(rest);
  return batch;
}

}  // namespace gpusearch
