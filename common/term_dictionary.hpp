// A hash table over the index's vocabulary: term text to TermId in O(1), where
// ShardIndex::find_term binary-searches the mapped lexicon (17-18 string compares, most of
// them cache misses). The aggregator resolves every arriving query on its one MPI thread; on
// the Debian collection the binary search was a third of that thread's time
// (tests/benchmarks/NOTES-cluster.md, issue 16 "the aggregator's ceiling"). Open addressing in
// one flat array (a 32-bit fingerprint of the term's hash and where its record is, per 8-byte
// slot, linear probing, at most half full): a look-up reads one slot, and the record only on a
// fingerprint match; a node-based std::unordered_map was itself half of a query's resolution (a division
// per probe and two dependent misses).
//
// Self-contained, in huge pages (session 31): the aggregator admits a batch after an idle gap in
// which the ISNs' engines evicted its caches, and a look-up through the shard's mapped lexicon
// then cost three dependent misses on 4 KiB pages (the slot, the lexicon's offset, the string),
// each with a TLB miss. The slot now points into the dictionary's own copy of the vocabulary (a
// record of the term's ID, length and bytes), and both arrays ask for huge pages: two misses and
// no page walks. 1M synthetic documents (3.4M terms; 116 MB against 64 MB before), build
// machine: resolving a query with the caches swept between batches of 64, 2.2 -> 1.6 us; the
// cluster's admission (`admission.us_per_query`, one ISN, interleaved runs) 1.9-2.1 -> 1.2-1.7 us.
// Session 50: the terms' dfs here too, and the prefetch rounds reworked (see prefetch()): 1.6-1.9
// -> 1.0-1.06 us a query cold on the same machine (tests/benchmarks/bench_admission.cpp).
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "common/huge_page_array.hpp"
#include "common/types.hpp"

namespace gpusearch {

class ShardIndex;

class TermDictionary {
 public:
  explicit TermDictionary(const ShardIndex& shard);
  // The same answer as shard.find_term(term).
  std::optional<TermId> find(std::string_view term) const;
  // The term's df_global (the shard's TermInfo's), kept here by TermId in huge pages: the
  // aggregator's admission reads it for every term it resolves, and the TermInfo array lies in
  // the shard's mapped file on 4 KiB pages (a TLB miss each, after an idle gap).
  std::uint32_t df_global(TermId t) const { return dfs_[t]; }
  // A batch's look-ups after an idle gap miss the caches twice a term, one after the other
  // (its slot, its record), and the caller then reads the term's df (df_global). Calling
  // prefetch(term, 0) for every term of the batch, then (term, 1), then (term, 2), before the
  // find()s overlaps those misses: stage 1 asks for the record's first line and the line of its
  // 16th term byte (about a third of the records end on the next line), stage 2 for the df of
  // the term the record names. Each stage reads only what an earlier one asked for. Hints only:
  // find() answers the same without them (any stage).
  static constexpr int kPrefetchStages = 3;
  void prefetch(std::string_view term, int stage) const { prefetch_hashed(hash(term), stage); }
  // The same over hash(term), taken once per term for all the stages.
  static std::uint64_t hash(std::string_view term);
  void prefetch_hashed(std::uint64_t term_hash, int stage) const;
  std::size_t size() const { return size_; }

 private:
  // 0: empty; else the term's hash fingerprint << 32 | (its record's offset in records_ + 1).
  HugePageArray<std::uint64_t> slots_;
  // Per term: its ID (4 bytes), its length (4 bytes), its bytes.
  HugePageArray<char> records_;
  HugePageArray<std::uint32_t> dfs_;  // by TermId
  std::uint64_t mask_ = 0;
  std::size_t size_ = 0;
};

}  // namespace gpusearch
