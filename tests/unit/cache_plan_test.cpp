// GPU list-cache plans (partition/cache_planner, common/cache_plan): budgets, lambda, prefixes,
// monotonicity in the budget, early termination's effect on the simulated reads, and a plan
// file that is refused when corrupt, truncated or made for another index.
#include <gtest/gtest.h>

#include <fstream>
#include <map>

#include "common/cache_plan.hpp"
#include "common/shard_index.hpp"
#include "partition/cache_planner.hpp"
#include "partition/index_builder.hpp"
#include "partition/synthetic_collection.hpp"
#include "test_support.hpp"

using namespace gpusearch;
using gpusearch::testing::TempDir;

namespace {

class CachePlanTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir();
    BuildOptions o;
    o.out_dir = *dir_ / "idx";
    o.progress = false;
    o.num_shards = 2;
    build_index_synthetic(
        SyntheticParams::parse("docs=12000,seed=21,train_queries=400,test_queries=10,mean_length=250"), o);
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }
  static std::filesystem::path idx() { return *dir_ / "idx"; }
  static std::filesystem::path train() { return idx() / "queries.train.tsv"; }
  static CachePlan plan(const Index& index, CachePolicy policy, std::uint64_t budget,
                        double lambda = 1.0, unsigned k = 10, Scoring s = Scoring::kBm25,
                        bool fill_spare = true) {
    CachePlanOptions o;
    o.fill_spare = fill_spare;
    o.policy = policy;
    o.budget_bytes = budget;
    o.lambda = lambda;
    o.k = k;
    o.scoring = s;
    o.progress = false;
    return make_cache_plan(index, train(), o);
  }
  static TempDir* dir_;
};
TempDir* CachePlanTest::dir_ = nullptr;

std::uint64_t list_bytes(const ShardIndex& shard, TermId t, std::uint32_t blocks) {
  const TermInfo& ti = shard.term(t);
  std::uint64_t bytes = 0;
  for (std::uint32_t j = 0; j < blocks; ++j) {
    const std::uint64_t b = ti.first_block + j;
    bytes += cached_block_bytes(shard.block_offsets()[b + 1] - shard.block_offsets()[b]);
  }
  return bytes;
}

}  // namespace

TEST_F(CachePlanTest, EveryPolicyKeepsItsBudgetAndCountsItsBytes) {
  const Index index = Index::open(idx());
  for (CachePolicy policy : {CachePolicy::kVfb, CachePolicy::kQtf, CachePolicy::kQtfDf}) {
    const std::uint64_t budget = 32 * 1024;
    const CachePlan p = plan(index, policy, budget, 0.5);
    ASSERT_EQ(p.shards.size(), 2u);
    for (const ShardCachePlan& sp : p.shards) {
      const ShardIndex& shard = index.shard(sp.shard);
      EXPECT_LE(sp.bytes, budget) << to_string(policy);
      EXPECT_GT(sp.bytes, budget / 2) << to_string(policy) << ": a small cache should fill";
      std::uint64_t bytes = 0;
      for (const CachedList& l : sp.lists) {
        const TermInfo& ti = shard.term(l.term);
        ASSERT_GE(l.blocks, 1u);
        ASSERT_LE(l.blocks, ti.num_blocks);
        EXPECT_EQ(l.bytes, list_bytes(shard, l.term, l.blocks));
        bytes += l.bytes;
        if (policy == CachePolicy::kVfb)  // never more than lambda of a list (at least a block)
          EXPECT_LE(l.blocks, std::max<std::uint32_t>(1, ti.num_blocks / 2)) << l.term;
        else  // Qtf and QtfDf cache whole lists
          EXPECT_EQ(l.blocks, ti.num_blocks) << l.term;
      }
      EXPECT_EQ(bytes, sp.bytes);
      EXPECT_LE(sp.training_block_reads_cached, sp.training_block_reads);
    }
  }
}

TEST_F(CachePlanTest, UnlimitedBudgetServesEveryTrainingRead) {
  const Index index = Index::open(idx());
  for (CachePolicy policy : {CachePolicy::kVfb, CachePolicy::kQtf, CachePolicy::kQtfDf}) {
    const CachePlan p = plan(index, policy, std::uint64_t(1) << 40);
    for (const ShardCachePlan& sp : p.shards) {
      EXPECT_GT(sp.training_block_reads, 0u);
      EXPECT_EQ(sp.training_block_reads_cached, sp.training_block_reads) << to_string(policy);
    }
  }
}

// Budget the training log's lists leave goes to whole lists no training query asked for,
// longest first (qtf, qtfdf, vfb with lambda 1); vfb with lambda < 1 leaves it empty.
TEST_F(CachePlanTest, SpareBudgetGoesToUnqueriedListsLongestFirst) {
  const Index index = Index::open(idx());
  for (CachePolicy policy : {CachePolicy::kVfb, CachePolicy::kQtf, CachePolicy::kQtfDf}) {
    // Every queried list, whole: the budget at which the log's plan stops growing.
    const CachePlan all = plan(index, policy, std::uint64_t(1) << 40, 1.0, 10, Scoring::kBm25, false);
    for (std::size_t s = 0; s < 2; ++s) {
      const ShardIndex& shard = index.shard(all.shards[s].shard);
      const std::uint64_t budget = all.shards[s].bytes * 3 / 2;
      const CachePlan bare = plan(index, policy, budget, 1.0, 10, Scoring::kBm25, false);
      const CachePlan filled = plan(index, policy, budget);
      std::map<TermId, std::uint32_t> queried, got;
      for (const CachedList& l : bare.shards[s].lists) queried[l.term] = l.blocks;
      for (const CachedList& l : filled.shards[s].lists) got[l.term] = l.blocks;
      EXPECT_EQ(bare.shards[s].bytes, all.shards[s].bytes) << to_string(policy);
      for (const auto& [t, blocks] : queried)
        EXPECT_EQ(got[t], blocks) << to_string(policy) << ": the log's list " << t << " changed";
      const std::uint64_t spare = budget - bare.shards[s].bytes;
      EXPECT_LE(filled.shards[s].bytes, budget) << to_string(policy);
      EXPECT_GE(filled.shards[s].bytes, bare.shards[s].bytes + spare / 2)
          << to_string(policy) << ": the spare budget should mostly fill";
      EXPECT_EQ(bare.shards[s].unqueried_lists, 0u) << to_string(policy);
      EXPECT_EQ(filled.shards[s].unqueried_bytes, filled.shards[s].bytes - bare.shards[s].bytes)
          << to_string(policy) << ": the fill is what the log's lists leave";
      EXPECT_EQ(filled.shards[s].unqueried_lists, filled.shards[s].lists.size() - queried.size());
      // The longest unqueried list that fits the spare is in; every added list is whole.
      TermId longest = 0;
      std::uint32_t longest_df = 0;
      for (TermId t = 0; t < shard.num_terms(); ++t) {
        const TermInfo& ti = shard.term(t);
        if (ti.num_blocks == 0 || queried.count(t)) continue;
        if (got.count(t)) {
          EXPECT_EQ(got[t], ti.num_blocks) << "term " << t;
        }
        if (list_bytes(shard, t, ti.num_blocks) <= spare && ti.df_shard > longest_df)
          longest = t, longest_df = ti.df_shard;
      }
      ASSERT_GT(longest_df, 0u);
      EXPECT_TRUE(got.count(longest)) << to_string(policy) << ": term " << longest << " (df "
                                      << longest_df << ") fits the spare budget and is not in";
    }
  }
  // vfb with lambda < 1 caps every list, so whole lists do not go in: the same plan either way.
  const CachePlan capped = plan(index, CachePolicy::kVfb, std::uint64_t(1) << 40, 0.5);
  const CachePlan capped_bare =
      plan(index, CachePolicy::kVfb, std::uint64_t(1) << 40, 0.5, 10, Scoring::kBm25, false);
  for (std::size_t s = 0; s < 2; ++s) {
    EXPECT_EQ(capped.shards[s].bytes, capped_bare.shards[s].bytes);
    EXPECT_EQ(capped.shards[s].lists.size(), capped_bare.shards[s].lists.size());
  }
}

// A bigger VFB budget admits a superset (the most visited blocks come first), and with a
// budget VFB serves at least as many training reads per cached byte as whole-list Qtf.
TEST_F(CachePlanTest, VfbIsMonotoneInTheBudgetAndServesReadsPerByteBetterThanQtf) {
  const Index index = Index::open(idx());
  const CachePlan small = plan(index, CachePolicy::kVfb, 32 * 1024);
  const CachePlan large = plan(index, CachePolicy::kVfb, 128 * 1024);
  const CachePlan qtf = plan(index, CachePolicy::kQtf, 32 * 1024);
  for (std::size_t s = 0; s < 2; ++s) {
    std::map<TermId, std::uint32_t> big;
    for (const CachedList& l : large.shards[s].lists) big[l.term] = l.blocks;
    for (const CachedList& l : small.shards[s].lists) {
      ASSERT_TRUE(big.count(l.term)) << "term " << l.term << " left the larger plan";
      EXPECT_LE(l.blocks, big[l.term]) << "term " << l.term;
    }
    EXPECT_GE(large.shards[s].training_block_reads_cached,
              small.shards[s].training_block_reads_cached);
    EXPECT_GE(small.shards[s].training_block_reads_cached, qtf.shards[s].training_block_reads_cached)
        << "VFB should serve at least as many training reads as Qtf in the same budget";
  }
}

// Early termination (bm25-pr over the GS order) cuts the reads: a smaller k stops no later.
TEST_F(CachePlanTest, EarlyTerminationShortensTheSimulatedReads) {
  const Index index = Index::open(idx());
  const CachePlan k10 = plan(index, CachePolicy::kVfb, std::uint64_t(1) << 40, 1.0, 10, Scoring::kBm25Pr);
  const CachePlan k1000 = plan(index, CachePolicy::kVfb, std::uint64_t(1) << 40, 1.0, 1000, Scoring::kBm25Pr);
  std::uint64_t r10 = 0, r1000 = 0;
  for (std::size_t s = 0; s < 2; ++s) {
    r10 += k10.shards[s].training_block_reads;
    r1000 += k1000.shards[s].training_block_reads;
  }
  EXPECT_LT(r10, r1000) << "k = 10 should terminate earlier than k = 1000";
}

TEST_F(CachePlanTest, PlanFileRoundTripsAndIsRefusedWhenCorruptTruncatedOrStale) {
  const Index index = Index::open(idx());
  TempDir tmp;
  const CachePlan p = plan(index, CachePolicy::kVfb, 64 * 1024, 0.75);
  const auto file = tmp / "plan.json";
  p.write(file);
  const CachePlan back = CachePlan::read(file, &index);
  ASSERT_EQ(back.shards.size(), p.shards.size());
  EXPECT_EQ(back.policy, CachePolicy::kVfb);
  EXPECT_DOUBLE_EQ(back.lambda, 0.75);
  for (std::size_t s = 0; s < p.shards.size(); ++s) {
    ASSERT_EQ(back.shards[s].lists.size(), p.shards[s].lists.size());
    for (std::size_t i = 0; i < p.shards[s].lists.size(); ++i) {
      EXPECT_EQ(back.shards[s].lists[i].term, p.shards[s].lists[i].term);
      EXPECT_EQ(back.shards[s].lists[i].blocks, p.shards[s].lists[i].blocks);
    }
  }
  const std::string text = gpusearch::testing::read_text(file);
  auto expect_refused = [&](const std::string& content, const std::string& needle,
                            const Index* against) {
    gpusearch::testing::write_text(tmp / "bad.json", content);
    try {
      CachePlan::read(tmp / "bad.json", against);
      FAIL() << "accepted a plan that should be refused (" << needle << ")";
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("bad.json"), std::string::npos) << e.what();
    }
  };
  // One list's block count changed: the checksum no longer matches.
  std::string edited = text;
  const auto at = edited.find("\"lists\":[[");
  ASSERT_NE(at, std::string::npos);
  const auto comma = edited.find(',', at + 10);
  edited.insert(comma, "0");
  expect_refused(edited, "checksum", nullptr);
  expect_refused(text.substr(0, text.size() / 2), "truncated or corrupt", nullptr);
  expect_refused("{\"format\":\"something-else\"}", "not a gpusearch cache plan", nullptr);
  // The same plan against another index (a different collection): stale.
  BuildOptions o;
  o.out_dir = tmp / "other";
  o.progress = false;
  o.num_shards = 2;
  build_index_synthetic(SyntheticParams::parse("docs=3000,seed=5,train_queries=20,test_queries=5"), o);
  const Index other = Index::open(tmp / "other");
  expect_refused(text, "stale cache plan", &other);
}

TEST_F(CachePlanTest, BadOptionsAreRejected) {
  const Index index = Index::open(idx());
  EXPECT_THROW(parse_cache_policy("lru"), InputError);
  EXPECT_THROW(plan(index, CachePolicy::kVfb, 1024, 0.0), InputError);
  EXPECT_THROW(plan(index, CachePolicy::kVfb, 1024, 1.5), InputError);
  EXPECT_THROW(plan(index, CachePolicy::kVfb, 0), InputError);
  CachePlanOptions o;
  o.budget_bytes = 1024;
  o.progress = false;
  TempDir tmp;
  gpusearch::testing::write_text(tmp / "q.tsv", "1\tzzzunknownzzz qqqnothingqqq\n");
  EXPECT_THROW(make_cache_plan(index, tmp / "q.tsv", o), InputError);
}
