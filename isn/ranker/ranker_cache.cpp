#include "isn/ranker/ranker_cache.hpp"

#include <chrono>

#include <fmt/format.h>

namespace gpusearch::ranker {

nlohmann::json to_json(const RankerCacheStats& s) {
  return {{"requests", s.requests},
          {"hits", s.hits},
          {"misses", s.misses},
          {"hit_rate", s.hit_rate()},
          {"loads", s.loads},
          {"evictions", s.evictions},
          {"commanded_loads", s.commanded_loads},
          {"commanded_evictions", s.commanded_evictions},
          {"unplanned_loads", s.unplanned_loads},
          {"unplanned_evictions", s.unplanned_evictions},
          {"unused_evictions", s.unused_evictions},
          {"load_failures", s.load_failures},
          {"load_bytes", s.load_bytes},
          {"load_seconds", s.load_seconds}};
}

RankerCache::RankerCache(const RankerStore& store, RankerBackend& backend,
                         std::uint64_t budget_bytes)
    : store_(store), backend_(backend), budget_bytes_(budget_bytes) {}

std::vector<std::string> RankerCache::resident_names() const {
  return {lru_.begin(), lru_.end()};
}

nlohmann::json RankerCache::stats_json() const {
  nlohmann::json j = to_json(stats_);
  j["budget_bytes"] = budget_bytes_;
  j["used_bytes"] = used_bytes_;
  j["resident"] = resident_names();
  j["backend"] = std::string(backend_.name());
  return j;
}

void RankerCache::evict_one(bool commanded) {
  const std::string victim = lru_.back();
  Entry& e = entries_.at(victim);
  if (e.fresh) ++stats_.unused_evictions;
  used_bytes_ -= e.bytes;
  lru_.pop_back();
  entries_.erase(victim);
  ++stats_.evictions;
  if (commanded) ++stats_.commanded_evictions;
}

RankerCache::Entry& RankerCache::load_entry(std::string_view name) {
  const auto t0 = std::chrono::steady_clock::now();
  std::shared_ptr<const CompiledRanker> compiled;
  std::unique_ptr<ResidentRanker> resident;
  try {
    compiled = store_.load(name);
    const std::uint64_t bytes = compiled->bytes();
    if (budget_bytes_ > 0 && bytes > budget_bytes_)
      throw RankerError((store_.dir() / store_.index().find(name)->file).string(),
                        fmt::format("needs {} bytes, more than the ranker cache's {} "
                                    "(--ranker-cache-mb)",
                                    bytes, budget_bytes_));
    // Room first (LRU), then the copy to the backend: a device never holds more than the budget.
    while (budget_bytes_ > 0 && used_bytes_ + bytes > budget_bytes_) evict_one(false);
    resident = backend_.make_resident(std::move(compiled));
  } catch (...) {
    ++stats_.load_failures;
    throw;
  }
  const std::uint64_t bytes = resident->bytes();
  lru_.emplace_front(name);
  Entry& e = entries_[std::string(name)];
  e.ranker = std::move(resident);
  e.bytes = bytes;
  e.lru = lru_.begin();
  used_bytes_ += bytes;
  ++stats_.loads;
  stats_.load_bytes += bytes;
  stats_.load_seconds +=
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return e;
}

const ResidentRanker& RankerCache::acquire(std::string_view name, std::uint64_t requests) {
  if (requests == 0) requests = 1;
  stats_.requests += requests;
  auto it = entries_.find(std::string(name));
  if (it != entries_.end()) {
    Entry& e = it->second;
    lru_.splice(lru_.begin(), lru_, e.lru);
    if (e.fresh) {  // the aggregator loaded it for this request
      e.fresh = false;
      ++stats_.misses;
      stats_.hits += requests - 1;
    } else {
      stats_.hits += requests;
    }
    return *e.ranker;
  }
  Entry* e = nullptr;
  try {
    e = &load_entry(name);
  } catch (...) {
    stats_.requests -= requests;  // answered by the first stage: no ranker request
    throw;
  }
  if (coordinated_) ++stats_.unplanned_loads;
  ++stats_.misses;
  stats_.hits += requests - 1;
  return *e->ranker;
}

void RankerCache::load(std::string_view name) {
  auto it = entries_.find(std::string(name));
  if (it != entries_.end()) {
    lru_.splice(lru_.begin(), lru_, it->second.lru);
    return;
  }
  const std::uint64_t evictions_before = stats_.evictions;
  Entry& e = load_entry(name);
  e.fresh = true;
  ++stats_.commanded_loads;
  // The aggregator evicts explicitly before it loads; an eviction here means its view of this
  // cache was wrong.
  stats_.unplanned_evictions += stats_.evictions - evictions_before;
}

bool RankerCache::evict(std::string_view name) {
  auto it = entries_.find(std::string(name));
  if (it == entries_.end()) return false;
  Entry& e = it->second;
  if (e.fresh) ++stats_.unused_evictions;
  used_bytes_ -= e.bytes;
  lru_.erase(e.lru);
  entries_.erase(it);
  ++stats_.evictions;
  ++stats_.commanded_evictions;
  return true;
}

}  // namespace gpusearch::ranker
