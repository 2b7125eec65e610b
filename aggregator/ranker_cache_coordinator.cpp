#include "aggregator/ranker_cache_coordinator.hpp"

#include <algorithm>
#include <set>
#include <stdexcept>

#include <fmt/format.h>

#include "common/error.hpp"

namespace gpusearch {

RankerCachePolicy parse_ranker_cache_policy(std::string_view name) {
  if (name == "coordinated") return RankerCachePolicy::kCoordinated;
  if (name == "per-isn-lru") return RankerCachePolicy::kPerIsnLru;
  throw InputError("--ranker-cache-policy", 0,
                   fmt::format("'{}': expected coordinated or per-isn-lru", name));
}

std::string_view to_string(RankerCachePolicy p) {
  return p == RankerCachePolicy::kCoordinated ? "coordinated" : "per-isn-lru";
}

RankerCacheCoordinator::RankerCacheCoordinator(ranker::StoreIndex store,
                                               std::uint64_t budget_bytes)
    : store_(std::move(store)), budget_bytes_(budget_bytes) {}

bool RankerCacheCoordinator::plannable(std::string_view name) const {
  const ranker::StoreEntry* e = store_.find(name);
  return e != nullptr && fits(e->bytes);
}

std::uint64_t RankerCacheCoordinator::bytes(std::string_view name) const {
  const ranker::StoreEntry* e = store_.find(name);
  return e != nullptr && fits(e->bytes) ? e->bytes : 0;
}

void RankerCacheCoordinator::touch(const std::string& name) {
  const auto it = where_.find(name);
  lru_.splice(lru_.begin(), lru_, it->second);
}

RankerCachePlan RankerCacheCoordinator::plan(
    std::span<const std::string> rankers, const std::function<bool(std::string_view)>& waiting) {
  RankerCachePlan plan;
  std::vector<std::string> batch;  // distinct plannable rankers, in ranking order
  std::set<std::string, std::less<>> in_batch;
  std::uint64_t batch_bytes = 0, missing_bytes = 0;
  for (const std::string& r : rankers) {
    if (in_batch.count(r)) continue;
    in_batch.insert(r);
    if (!plannable(r)) {
      ++stats_.unplannable;
      continue;
    }
    ++stats_.requests;
    batch.push_back(r);
    batch_bytes += bytes(r);
    if (resident(r))
      ++stats_.resident_hits;
    else
      missing_bytes += bytes(r);
  }
  if (!fits(batch_bytes))
    throw std::logic_error(fmt::format(
        "ranker cache plan: the batch's rankers need {} bytes together, over the budget of {}",
        batch_bytes, budget_bytes_));
  ++stats_.batches;
  // Victims: least recently used first, outside the batch; rankers no waiting query needs before
  // those that one does.
  if (budget_bytes_ > 0 && used_bytes_ + missing_bytes > budget_bytes_) {
    for (const bool spare_waiting : {true, false}) {
      // From the least recently used end; erase() returns the element after the victim, so
      // the next step back lands on the one before it.
      for (auto it = lru_.end(); it != lru_.begin() && used_bytes_ + missing_bytes > budget_bytes_;) {
        --it;
        const std::string& name = *it;
        if (in_batch.count(name) || (spare_waiting && waiting && waiting(name))) continue;
        if (!spare_waiting && waiting && waiting(name)) ++stats_.evictions_of_waiting;
        used_bytes_ -= bytes(name);
        plan.evict.push_back(name);
        where_.erase(name);
        it = lru_.erase(it);
        ++stats_.evictions;
      }
    }
  }
  for (const std::string& r : batch) {
    if (resident(r)) {
      touch(r);
      continue;
    }
    lru_.push_front(r);
    where_[r] = lru_.begin();
    used_bytes_ += bytes(r);
    plan.load.push_back(r);
    ++stats_.loads;
    stats_.load_bytes += bytes(r);
  }
  if (!plan.empty()) ++stats_.plans_sent;
  return plan;
}

nlohmann::json RankerCacheCoordinator::to_json() const {
  const RankerCoordinatorStats& s = stats_;
  return {{"budget_bytes", budget_bytes_},
          {"used_bytes", used_bytes_},
          {"batches_planned", s.batches},
          {"requests", s.requests},
          {"resident_hits", s.resident_hits},
          {"hit_rate", s.requests ? double(s.resident_hits) / double(s.requests) : 0.0},
          {"loads", s.loads},
          {"evictions", s.evictions},
          {"evictions_of_waiting", s.evictions_of_waiting},
          {"load_bytes", s.load_bytes},
          {"unplannable_requests", s.unplannable},
          {"plans_sent", s.plans_sent},
          {"resident", resident_names()}};
}

}  // namespace gpusearch
