#include "aggregator/result_cache.hpp"

#include <fmt/format.h>

namespace gpusearch {

std::string result_cache_key(const SearchParams& params, const std::vector<std::string>& terms,
                             const std::string& ranker) {
  std::string key = fmt::format("{}|{}|{:.17g}|{}|{}|{}", to_string(params.mode),
                                to_string(params.scoring), params.alpha, params.k,
                                params.candidates, ranker);
  for (const std::string& t : terms) {
    key += '\x1f';  // not a token byte: terms cannot contain it
    key += t;
  }
  return key;
}

std::optional<CachedAnswer> ResultCache::find(const std::string& key) {
  const auto it = index_.find(key);
  if (it == index_.end()) return std::nullopt;
  lru_.splice(lru_.begin(), lru_, it->second);
  return it->second->second;
}

void ResultCache::insert(const std::string& key, CachedAnswer answer) {
  if (capacity_ == 0) return;
  if (const auto it = index_.find(key); it != index_.end()) {
    it->second->second = std::move(answer);
    lru_.splice(lru_.begin(), lru_, it->second);
    return;
  }
  lru_.emplace_front(key, std::move(answer));
  index_.emplace(key, lru_.begin());
  if (index_.size() > capacity_) {
    index_.erase(lru_.back().first);
    lru_.pop_back();
    ++evictions_;
  }
}

}  // namespace gpusearch
