// A hash table over the index's vocabulary: term text to TermId in O(1), where
// ShardIndex::find_term binary-searches the mapped lexicon (17-18 string compares, most of
// them cache misses, for a vocabulary of ~200,000 terms). The aggregator resolves every
// arriving query on its one MPI thread; on the Debian collection the binary search was a third
// of that thread's time (tests/benchmarks/NOTES-cluster.md, issue 16 "aggregator's ceiling").
// Keys are views into the shard's mapped lexicon: the shard must outlive the dictionary.
#pragma once

#include <optional>
#include <string_view>
#include <unordered_map>

#include "common/types.hpp"

namespace gpusearch {

class ShardIndex;

class TermDictionary {
 public:
  explicit TermDictionary(const ShardIndex& shard);
  // The same answer as shard.find_term(term).
  std::optional<TermId> find(std::string_view term) const {
    const auto it = ids_.find(term);
    if (it == ids_.end()) return std::nullopt;
    return it->second;
  }
  std::size_t size() const { return ids_.size(); }

 private:
  std::unordered_map<std::string_view, TermId> ids_;
};

}  // namespace gpusearch
