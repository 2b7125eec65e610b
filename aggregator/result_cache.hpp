// The aggregator's LRU result cache: answers a repeated query without a broadcast. The key is
// the query as it would be scored (its terms in query order, since scores sum in that order,
// plus mode, scoring, alpha and k); partial answers are never stored.
#pragma once

#include <cstdint>
#include <list>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "common/search_result.hpp"

namespace gpusearch {

struct CachedHit {
  std::string docid;
  double score = 0;
};
struct CachedAnswer {
  std::vector<CachedHit> hits;
  bool answered_by_or = false;
};
// A hit whose external id is a view (into a received message, or a PackedAnswers buffer).
struct HitView {
  std::string_view docid;
  double score = 0;
};
// The owned form of an answer given as views (for the cache, or a live client).
inline CachedAnswer owned_answer(std::span<const HitView> hits, bool answered_by_or) {
  CachedAnswer a;
  a.answered_by_or = answered_by_or;
  a.hits.reserve(hits.size());
  for (const HitView& h : hits) a.hits.push_back({std::string(h.docid), h.score});
  return a;
}

// The answer depends on the params (candidates too), the terms in order and the query's ranker.
std::string result_cache_key(const SearchParams& params, const std::vector<std::string>& terms,
                             const std::string& ranker = {});

class ResultCache {
 public:
  explicit ResultCache(std::size_t capacity) : capacity_(capacity) {}
  bool enabled() const { return capacity_ > 0; }
  // Marks the entry most recently used.
  std::optional<CachedAnswer> find(const std::string& key);
  void insert(const std::string& key, CachedAnswer answer);
  std::size_t size() const { return index_.size(); }
  std::uint64_t evictions() const { return evictions_; }

 private:
  using Entry = std::pair<std::string, CachedAnswer>;
  std::size_t capacity_;
  std::list<Entry> lru_;  // front: most recently used
  std::unordered_map<std::string, std::list<Entry>::iterator> index_;
  std::uint64_t evictions_ = 0;
};

}  // namespace gpusearch
