// The list cache's unit tests' index (a 20,000-document synthetic shard, its test queries and
// cache plans from its training log) and HostPool, a host copy of a device pool and its
// block-offset table (list_cache_test.cpp, list_cache_directory_test.cpp).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "common/list_cache.hpp"
#include "common/query.hpp"
#include "common/shard_index.hpp"
#include "partition/cache_planner.hpp"
#include "partition/index_builder.hpp"
#include "partition/synthetic_collection.hpp"
#include "test_support.hpp"

namespace gpusearch::testing {

class ListCacheIndex : public ::testing::Test {
 protected:
  // Each suite deriving from it builds the index once (its own SetUpTestSuite).
  static void SetUpTestSuite() {
    dir_ = new TempDir();
    BuildOptions o;
    o.out_dir = *dir_ / "idx";
    o.progress = false;
    o.num_shards = 1;
    build_index_synthetic(SyntheticParams::parse("docs=20000,seed=5,train_queries=400,"
                                                 "test_queries=300,mean_length=250"),
                          o);
    index_ = new Index(Index::open(*dir_ / "idx"));
    queries_ =
        new std::vector<Query>(known_queries(index_->shard(0), *dir_ / "idx" / "queries.test.tsv"));
  }
  static void TearDownTestSuite() {
    delete queries_;
    delete index_;
    delete dir_;
    queries_ = nullptr;
    index_ = nullptr;
    dir_ = nullptr;
  }
  static const ShardIndex& shard() { return index_->shard(0); }
  static std::uint64_t index_bytes() { return shard().postings().size_bytes(); }
  static CachePlan plan(CachePolicy policy, std::uint64_t budget, double lambda) {
    CachePlanOptions o;
    o.policy = policy;
    o.budget_bytes = std::max<std::uint64_t>(budget, 1);
    o.lambda = lambda;
    o.progress = false;
    return make_cache_plan(*index_, *dir_ / "idx" / "queries.train.tsv", o);
  }
  static inline TempDir* dir_ = nullptr;
  static inline Index* index_ = nullptr;
  static inline std::vector<Query>* queries_ = nullptr;
};

// A host copy of a device pool and one block-offset table, as the kernels address them.
struct HostPool {
  std::vector<std::uint32_t> words;
  std::vector<std::uint64_t> table;
  HostPool(std::uint64_t pool_words, std::uint64_t slots)
      : words(pool_words, 0xdeadbeefu), table(slots, ~std::uint64_t(0)) {}
  void copy(const ShardIndex& shard, const WordCopy& c, std::uint64_t base) {
    ASSERT_LE(base + c.pool_word_offset + c.words, words.size());
    std::copy_n(shard.postings().begin() + std::ptrdiff_t(c.host_word_begin), c.words,
                words.begin() + std::ptrdiff_t(base + c.pool_word_offset));
  }
  // A change's relocations, as the device moves them: group by group through a scratch region
  // (gathered whole, then scattered), small enough that lists span groups.
  void relocate(const std::vector<WordRelocation>& relocations, std::uint64_t scratch_words = 997,
                std::uint64_t max_piece_words = 301, std::size_t max_pieces = 5) {
    std::vector<std::uint32_t> scratch(scratch_words);
    for (const auto& group :
         relocation_groups(relocations, scratch_words, max_piece_words, max_pieces)) {
      ASSERT_LE(group.size(), max_pieces);
      for (const RelocationPiece& p : group) {
        ASSERT_LE(p.words, max_piece_words);
        ASSERT_LE(p.scratch + p.words, scratch_words);
        ASSERT_LE(p.from + p.words, words.size());
        std::copy_n(words.begin() + std::ptrdiff_t(p.from), p.words,
                    scratch.begin() + std::ptrdiff_t(p.scratch));
      }
      for (const RelocationPiece& p : group) {
        ASSERT_LE(p.to + p.words, words.size());
        std::copy_n(scratch.begin() + std::ptrdiff_t(p.scratch), p.words,
                    words.begin() + std::ptrdiff_t(p.to));
      }
    }
  }
  // A change's relocated lists' table entries, moved with them.
  void shift(const std::vector<TableShift>& shifts) {
    for (const TableShift& sh : shifts)
      for (std::uint64_t i = 0; i < sh.slots; ++i) table.at(sh.first_slot + i) += sh.delta;
  }
  // Everything a change asks of the device, in the device's order.
  void apply(const ShardIndex& shard, const CacheChange& c) {
    relocate(c.relocations);
    for (const WordCopy& w : c.copies) copy(shard, w, 0);
    shift(c.shifts);
    patch(c.patches, 0);
  }
  void patch(const std::vector<OffsetPatch>& patches, std::uint64_t base) {
    for (const OffsetPatch& p : patches) table.at(p.slot) = base + p.word_offset;
  }
  // Whether the first `blocks` blocks of t read back as the shard's words.
  ::testing::AssertionResult addresses(const ShardIndex& shard, const DeviceBlockNumbering& n,
                                       TermId t, std::uint32_t blocks) const {
    const TermInfo& ti = shard.term(t);
    const auto offsets = shard.block_offsets();
    for (std::uint32_t j = 0; j < blocks; ++j) {
      const std::uint64_t s = n.first_slot(t) + j;
      const std::uint64_t begin = table[s], end = table[s + 1];
      const std::uint64_t b = ti.first_block + j;
      if (end < begin || end - begin != offsets[b + 1] - offsets[b] || end > words.size())
        return ::testing::AssertionFailure()
               << "term " << t << " block " << j << ": table [" << begin << ", " << end << ")";
      for (std::uint64_t w = 0; w < end - begin; ++w)
        if (words[begin + w] != shard.postings()[offsets[b] + w])
          return ::testing::AssertionFailure() << "term " << t << " block " << j << " word " << w;
    }
    return ::testing::AssertionSuccess();
  }
};

}  // namespace gpusearch::testing
