// The cluster-wide ranker cache (issue 12; paper 004, 3.6): the aggregator keeps one LRU view of
// the rankers resident on the ISNs (every ISN ranks every batch, so their caches hold the same
// rankers) within the ISNs' byte budget (--ranker-cache-mb), sized from the store's index
// (common/ranker/store_index.hpp: the compiled bytes an ISN's cache charges). Before a batch is
// broadcast, plan() names the evictions and loads that make the batch's rankers resident on
// every ISN; the ISN applies them just before it ranks that batch (isn/isn_engine_thread.cpp), so its
// cache never has to choose a victim itself.
//
// Why the view stays exact: an ISN's cache (isn/ranker/ranker_cache.hpp) charges a ranker its
// store size, evicts only on command while the plan leaves room, and ranks a batch's rankers in
// order of first appearance, touching each: plan() leaves the view in that same order. A ranker
// that fails to load on an ISN (a bad file) only leaves that ISN's cache smaller than the view,
// never larger, so the plan still fits.
//
// Policy: evict the least recently used ranker that is not in the batch, preferring one that no
// query waiting in the batcher needs (the aggregator sees that much of the future); the batcher
// groups a window's queries by ranker (aggregator/batcher.hpp) so that a batch's rankers always
// fit together and resident rankers are used before new ones are loaded.
#pragma once

#include <cstdint>
#include <functional>
#include <list>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/ranker/store_index.hpp"

namespace gpusearch {

// --ranker-cache-policy: coordinated (this class's plans, control messages, batches grouped by
// ranker) or per-isn-lru (each ISN's own LRU on demand, batches in arrival order, no messages).
enum class RankerCachePolicy { kCoordinated, kPerIsnLru };
RankerCachePolicy parse_ranker_cache_policy(std::string_view name);  // throws InputError
std::string_view to_string(RankerCachePolicy p);

struct RankerCachePlan {
  std::vector<std::string> evict, load;  // evictions first, then loads
  bool empty() const { return evict.empty() && load.empty(); }
};

struct RankerCoordinatorStats {
  std::uint64_t batches = 0;        // planned
  std::uint64_t requests = 0;       // a batch's distinct plannable rankers, summed
  std::uint64_t resident_hits = 0;  // of those, already resident
  std::uint64_t loads = 0, evictions = 0, load_bytes = 0;
  std::uint64_t evictions_of_waiting = 0;  // victims a waiting query needed (no other room)
  std::uint64_t unplannable = 0;  // requests for rankers the store lacks or the budget cannot hold
  std::uint64_t plans_sent = 0;   // non-empty plans (one control message per ISN each)
};

class RankerCacheCoordinator {
 public:
  // budget_bytes 0: unbounded (nothing is ever evicted).
  RankerCacheCoordinator(ranker::StoreIndex store, std::uint64_t budget_bytes);

  // Listed in the store and no larger than the budget. Other rankers are left to the ISNs: they
  // answer those queries with the first stage and an error naming the file (or the store).
  bool plannable(std::string_view name) const;
  // The bytes a ranker takes in a cache; 0 when not plannable (it never occupies one).
  std::uint64_t bytes(std::string_view name) const;
  std::uint64_t budget_bytes() const { return budget_bytes_; }
  bool fits(std::uint64_t bytes) const { return budget_bytes_ == 0 || bytes <= budget_bytes_; }
  bool resident(std::string_view name) const { return where_.count(std::string(name)) > 0; }
  std::vector<std::string> resident_names() const { return {lru_.begin(), lru_.end()}; }
  std::uint64_t used_bytes() const { return used_bytes_; }

  // The commands that make `rankers` (a batch's rankers, in the order the ISNs rank them:
  // first appearance in the batch) resident. `waiting(name)`: a query still in the batcher uses
  // it. Rankers that are not plannable are skipped. Throws std::logic_error when the batch's
  // plannable rankers do not fit together (the batcher never cuts such a batch).
  RankerCachePlan plan(std::span<const std::string> rankers,
                       const std::function<bool(std::string_view)>& waiting = {});

  const RankerCoordinatorStats& stats() const { return stats_; }
  nlohmann::json to_json() const;

 private:
  void touch(const std::string& name);
  ranker::StoreIndex store_;
  std::uint64_t budget_bytes_;
  std::uint64_t used_bytes_ = 0;
  std::list<std::string> lru_;  // front: most recently used
  std::unordered_map<std::string, std::list<std::string>::iterator> where_;
  RankerCoordinatorStats stats_;
};

}  // namespace gpusearch
