#include "aggregator/batcher.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <set>

#include "aggregator/ranker_cache_coordinator.hpp"

namespace gpusearch {

std::size_t Batcher::most_urgent() const {
  std::size_t best = pending_.size();
  for (std::size_t i = 0; i < pending_.size(); ++i)
    if (pending_[i].deadline != AggregatorClock::time_point::max() &&
        (best == pending_.size() || pending_[i].deadline < pending_[best].deadline))
      best = i;
  return best;
}

AggregatorClock::time_point Batcher::next_due() const {
  if (pending_.empty()) return AggregatorClock::time_point::max();
  auto t = pending_.front().arrival + std::chrono::microseconds(policy_.max_wait_us);
  const std::size_t u = most_urgent();
  if (u < pending_.size()) t = std::min(t, pending_[u].deadline - service_);
  return t;
}

bool Batcher::due(AggregatorClock::time_point now, bool flush) const {
  if (pending_.empty()) return false;
  if (flush || pending_.size() >= policy_.batch_size) return true;
  return now >= next_due();
}

std::vector<PendingQuery> Batcher::cut() {
  if (pending_.empty()) return {};
  // The batch's anchor: the oldest query, unless a deadline is what made the batch due (the
  // query of the nearest deadline then leads, so that it is not left behind for a batch of
  // older queries of other params).
  std::size_t anchor = 0;
  const std::size_t u = most_urgent();
  if (u < pending_.size() && AggregatorClock::now() >= pending_[u].deadline - service_) {
    anchor = u;
    ++deadline_cuts_;
  }
  const SearchParams params = pending_[anchor].params;
  // Just in time the batcher holds exactly the next batch, all of one params: it goes whole, in
  // arrival order (the general path below took 6.4 us of a batch of 64 on the 2-core machine,
  // moving each query twice, and counting rankers; on the batch's critical path).
  if (anchor == 0 && coordinator_ == nullptr && pending_.size() <= policy_.batch_size &&
      std::all_of(pending_.begin(), pending_.end(),
                  [&](const PendingQuery& q) { return same_params(q.params, params); })) {
    std::vector<PendingQuery> batch(std::make_move_iterator(pending_.begin()),
                                    std::make_move_iterator(pending_.end()));
    pending_.clear();
    for (const PendingQuery& q : batch)
      if (!q.ranker.empty() && --waiting_[q.ranker] == 0) waiting_.erase(q.ranker);
    return batch;
  }
  // Candidates: the anchor first, then every waiting query of the same params in arrival order.
  std::vector<std::size_t> candidates{anchor};
  for (std::size_t i = 0; i < pending_.size(); ++i)
    if (i != anchor && same_params(pending_[i].params, params)) candidates.push_back(i);
  const std::size_t n = std::min(policy_.batch_size, candidates.size());
  std::vector<bool> take(pending_.size(), false);
  if (coordinator_ != nullptr) {
    take_by_ranker(candidates, n, take);
  } else if (!policy_.cost_buckets || candidates.size() <= n) {
    for (std::size_t j = 0; j < n; ++j) take[candidates[j]] = true;
  } else {
    // Cost on a log scale: list lengths span orders of magnitude.
    const double centre = std::log1p(pending_[anchor].cost);
    auto distance = [&](std::size_t i) { return std::abs(std::log1p(pending_[i].cost) - centre); };
    std::stable_sort(candidates.begin() + 1, candidates.end(),
                     [&](std::size_t a, std::size_t b) { return distance(a) < distance(b); });
    for (std::size_t j = 0; j < n; ++j) take[candidates[j]] = true;
  }
  // The batch in arrival order (the anchor first), the rest keep theirs.
  std::vector<PendingQuery> batch;
  batch.reserve(n);
  batch.push_back(std::move(pending_[anchor]));
  std::deque<PendingQuery> rest;
  for (std::size_t i = 0; i < pending_.size(); ++i) {
    if (i == anchor) continue;
    (take[i] ? batch.emplace_back(std::move(pending_[i])) : rest.emplace_back(std::move(pending_[i])));
  }
  pending_ = std::move(rest);
  for (const PendingQuery& q : batch)
    if (!q.ranker.empty() && --waiting_[q.ranker] == 0) waiting_.erase(q.ranker);
  return batch;
}

void Batcher::take_by_ranker(const std::vector<std::size_t>& candidates, std::size_t n,
                             std::vector<bool>& take) const {
  const RankerCacheCoordinator& c = *coordinator_;
  std::set<std::string, std::less<>> chosen;
  std::uint64_t chosen_bytes = 0;
  std::size_t taken = 0;
  auto choose = [&](const std::string& r) {
    chosen.insert(r);
    chosen_bytes += c.bytes(r);
    for (std::size_t i : candidates)  // the chosen ranker's queries, in arrival order
      if (taken < n && !take[i] && pending_[i].ranker == r) take[i] = true, ++taken;
  };
  take[candidates.front()] = true, ++taken;  // the anchor always goes: bounded waits
  choose(pending_[candidates.front()].ranker);
  while (taken < n) {
    // The next ranker: one that fits beside the chosen ones; resident before a load, then the
    // most queries waiting, then the oldest query.
    std::unordered_map<std::string_view, std::size_t> count;
    std::vector<std::string_view> order;  // by oldest query
    for (std::size_t i : candidates) {
      const std::string& r = pending_[i].ranker;
      if (take[i] || chosen.count(r) || !c.fits(chosen_bytes + c.bytes(r))) continue;
      if (count[r]++ == 0) order.push_back(r);
    }
    if (order.empty()) break;
    std::string_view best = order.front();
    auto better = [&](std::string_view a, std::string_view b) {
      const bool ra = c.resident(a) || c.bytes(a) == 0, rb = c.resident(b) || c.bytes(b) == 0;
      if (ra != rb) return ra;
      return count[a] > count[b];
    };
    for (std::string_view r : order)
      if (better(r, best)) best = r;
    choose(std::string(best));
  }
}

}  // namespace gpusearch
