// A hash table over the index's vocabulary: term text to TermId in O(1), where
// ShardIndex::find_term binary-searches the mapped lexicon (17-18 string compares, most of
// them cache misses). The aggregator resolves every arriving query on its one MPI thread; on
// the Debian collection the binary search was a third of that thread's time
// (tests/benchmarks/NOTES-cluster.md, issue 16 "the aggregator's ceiling"). Open addressing in
// one flat array (a 32-bit fingerprint of the term's hash and its ID per 8-byte slot, linear
// probing, at most half full): a look-up reads one slot, and the lexicon only on a fingerprint
// match; a node-based std::unordered_map was itself half of a query's resolution (a division
// per probe and two dependent misses). The shard must outlive the dictionary.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "common/types.hpp"

namespace gpusearch {

class ShardIndex;

class TermDictionary {
 public:
  explicit TermDictionary(const ShardIndex& shard);
  // The same answer as shard.find_term(term).
  std::optional<TermId> find(std::string_view term) const;
  // A batch's look-ups after an idle gap miss the caches three times a term, one miss after
  // the other (its slot, the lexicon's offset, the string: about 2 us a query of the CPU's
  // time on the aggregator's admission path). Calling prefetch(term, 0) for every term of the
  // batch, then (term, 1), then (term, 2), before the find()s overlaps those misses; it reads
  // only what an earlier stage asked for. Hints only: find() answers the same without them.
  void prefetch(std::string_view term, int stage) const;
  std::size_t size() const { return size_; }

 private:
  const ShardIndex& shard_;
  std::vector<std::uint64_t> slots_;  // 0: empty; else fingerprint << 32 | (term ID + 1)
  std::uint64_t mask_ = 0;
  std::size_t size_ = 0;
};

}  // namespace gpusearch
