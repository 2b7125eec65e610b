// The ISN's ranker cache (paper 004, 3.6: "the GPU ranker cache manager uses LRU"): the rankers
// resident in the backend (device memory for the GPU) within a byte budget (--ranker-cache-mb).
// A query's ranker that is not resident is loaded from the store, evicting the least recently
// used rankers until it fits; the aggregator can also load and evict by command (cluster-wide
// coordination, aggregator/ranker_cache_coordinator.hpp).
//
// Counting: every ranked query is a request; a request is a hit unless a load happened for it.
// A ranker the aggregator had loaded for a batch counts its first request as the miss that
// caused the load, so hit rates compare between coordinated and local policies.
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

#include "isn/ranker/ranker_backend.hpp"
#include "isn/ranker/ranker_store.hpp"

namespace gpusearch::ranker {

struct RankerCacheStats {
  std::uint64_t requests = 0, hits = 0, misses = 0;
  std::uint64_t loads = 0, evictions = 0;  // all, commanded or not
  std::uint64_t commanded_loads = 0, commanded_evictions = 0;
  std::uint64_t unplanned_loads = 0;      // loads on a request while the aggregator coordinates
  std::uint64_t unplanned_evictions = 0;  // evictions a commanded load had to make itself
  std::uint64_t unused_evictions = 0;     // loaded, never requested, evicted
  std::uint64_t load_failures = 0;
  std::uint64_t load_bytes = 0;
  double load_seconds = 0;
  double hit_rate() const { return requests ? double(hits) / double(requests) : 0.0; }
};
nlohmann::json to_json(const RankerCacheStats& s);

class RankerCache {
 public:
  // budget_bytes 0: unbounded.
  RankerCache(const RankerStore& store, RankerBackend& backend, std::uint64_t budget_bytes);

  // A query's use of ranker `name` (`requests` queries at once, e.g. a batch's group): resident,
  // a hit; else loaded now (a miss), evicting least recently used rankers. Throws RankerError
  // (the cache unchanged) when the ranker cannot be loaded or is larger than the budget.
  const ResidentRanker& acquire(std::string_view name, std::uint64_t requests = 1);

  // The aggregator's commands. load: no request counted (the batch's first request will be the
  // miss); a resident ranker is only touched. Evictions of `load` follow LRU if the aggregator's
  // plan left too little room (counted as unplanned). evict: false when not resident.
  void load(std::string_view name);
  bool evict(std::string_view name);
  // While coordinated, a load on request means the aggregator's plan missed it.
  void set_coordinated(bool on) { coordinated_ = on; }

  bool resident(std::string_view name) const { return entries_.count(std::string(name)) > 0; }
  std::vector<std::string> resident_names() const;  // most recently used first
  std::uint64_t used_bytes() const { return used_bytes_; }
  std::uint64_t budget_bytes() const { return budget_bytes_; }
  const RankerCacheStats& stats() const { return stats_; }
  nlohmann::json stats_json() const;

 private:
  struct Entry {
    std::unique_ptr<ResidentRanker> ranker;
    std::uint64_t bytes = 0;
    bool fresh = false;  // loaded by command, not requested yet
    std::list<std::string>::iterator lru;
  };
  Entry& load_entry(std::string_view name);
  void evict_one(bool commanded);

  const RankerStore& store_;
  RankerBackend& backend_;
  std::uint64_t budget_bytes_;
  std::uint64_t used_bytes_ = 0;
  bool coordinated_ = false;
  std::list<std::string> lru_;  // front: most recently used
  std::unordered_map<std::string, Entry> entries_;
  RankerCacheStats stats_;
};

}  // namespace gpusearch::ranker
