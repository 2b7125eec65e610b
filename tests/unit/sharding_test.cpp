// Scores and answers do not depend on the partitioning: the reference engine writes the same
// run file from 1, 2 and 5 shards, from both split modes, built directly or re-partitioned.
#include <gtest/gtest.h>

#include <sstream>

#include "common/shard_index.hpp"
#include "isn/search_session.hpp"
#include "partition/index_builder.hpp"
#include "partition/repartition.hpp"
#include "test_support.hpp"

using namespace gpusearch;
using gpusearch::testing::TempDir;

namespace {

class ShardingTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir();
    BuildOptions o;
    o.out_dir = *dir_ / "one";
    o.progress = false;
    build_index_synthetic(
        SyntheticParams::parse("docs=4000,seed=3,train_queries=10,test_queries=300"), o);
    o.out_dir = *dir_ / "two-built";
    o.num_shards = 2;
    build_index_synthetic(
        SyntheticParams::parse("docs=4000,seed=3,train_queries=10,test_queries=300"), o);
    for (std::uint32_t shards : {2u, 5u})
      for (SplitMode m : {SplitMode::kInputRanges, SplitMode::kGsTiers, SplitMode::kRoundRobin})
        repartition_index(*dir_ / "one", *dir_ / name(shards, m), shards, m, std::nullopt, false, false);
    // A different codec must not change answers either.
    repartition_index(*dir_ / "one", *dir_ / "bp128", 3, SplitMode::kInputRanges,
                      codec::Codec::kBitPacking, false, false);
  }
  static void TearDownTestSuite() { delete dir_; }
  static std::string name(std::uint32_t shards, SplitMode m) {
    return std::to_string(shards) + "-" + std::string(to_string(m));
  }
  static std::string run(const std::string& index, Mode mode, Scoring scoring, unsigned k) {
    SearchSessionOptions so;
    so.index_dir = *dir_ / index;
    so.queries_path = *dir_ / "one" / "queries.test.tsv";
    so.params.mode = mode;
    so.params.scoring = scoring;
    so.params.k = k;
    so.progress = false;
    so.batch_size = 97;
    std::ostringstream out;
    run_search_session(so, out);
    return out.str();
  }
  static TempDir* dir_;
};
TempDir* ShardingTest::dir_ = nullptr;

TEST_F(ShardingTest, ShardsCoverTheCollectionOnce) {
  for (const std::string idx : {"2-input-ranges", "5-gs-tiers", "5-round-robin", "two-built"}) {
    const Index index = Index::open(*dir_ / idx);
    std::uint64_t docs = 0, postings = 0;
    for (std::size_t s = 0; s < index.num_open_shards(); ++s) {
      docs += index.shard(s).num_docs();
      postings += index.shard(s).manifest().num_postings;
      EXPECT_EQ(index.shard(s).params().collection.num_docs, 4000u);  // collection-wide N
    }
    EXPECT_EQ(docs, 4000u) << idx;
    EXPECT_EQ(postings, index.params().num_postings_total) << idx;
  }
}

// Round-robin: shard sizes differ by at most one document, and every shard holds its share of
// the postings within 15%: a uniform sample of 800 documents whose lengths are lognormal
// (sigma 1) has a relative standard deviation of about 4.6% in its postings.
TEST_F(ShardingTest, RoundRobinSplitsDocumentsAndPostingsEvenly) {
  const Index index = Index::open(*dir_ / "5-round-robin");
  ASSERT_EQ(index.num_open_shards(), 5u);
  EXPECT_EQ(to_string(index.params().split), "round-robin");
  const double mean_postings = double(index.params().num_postings_total) / 5;
  for (std::size_t s = 0; s < 5; ++s) {
    EXPECT_EQ(index.shard(s).num_docs(), 800u) << s;
    EXPECT_NEAR(double(index.shard(s).manifest().num_postings), mean_postings,
                0.15 * mean_postings)
        << s;
  }
}

TEST_F(ShardingTest, GsTiersHoldContiguousRangesOfTheGlobalOrder) {
  const Index index = Index::open(*dir_ / "5-gs-tiers");
  GlobalRank expected = 0;
  for (std::size_t s = 0; s < index.num_open_shards(); ++s)
    for (GlobalRank r : index.shard(s).global_ranks()) EXPECT_EQ(r, expected++);
}

// The readers' shortcut (ShardIndex::contiguous_rank_base: a rank computed, not looked up) is
// offered exactly where a shard's ranks run contiguously: one shard and GS tiers, not input
// ranges (whose shards interleave in the global order).
TEST_F(ShardingTest, ContiguousRankBaseOnlyWhereTheRanksRunContiguously) {
  const Index one = Index::open(*dir_ / "one");
  ASSERT_TRUE(one.shard(0).contiguous_rank_base().has_value());
  EXPECT_EQ(*one.shard(0).contiguous_rank_base(), 0u);
  const Index tiers = Index::open(*dir_ / "5-gs-tiers");
  for (std::size_t s = 0; s < tiers.num_open_shards(); ++s) {
    const auto ranks = tiers.shard(s).global_ranks();
    ASSERT_TRUE(tiers.shard(s).contiguous_rank_base().has_value()) << s;
    EXPECT_EQ(*tiers.shard(s).contiguous_rank_base(), ranks[0]) << s;
  }
  const Index input = Index::open(*dir_ / "5-input-ranges");
  for (std::size_t s = 0; s < input.num_open_shards(); ++s)
    EXPECT_FALSE(input.shard(s).contiguous_rank_base().has_value()) << s;

  const std::vector<GlobalRank> run = {7, 8, 9, 10}, gap = {7, 8, 10, 11}, down = {3, 2},
                                top = {0xFFFFFFFEu, 0xFFFFFFFFu};
  EXPECT_EQ(contiguous_run_base(run), std::optional<GlobalRank>(7));
  EXPECT_EQ(contiguous_run_base(top), std::optional<GlobalRank>(0xFFFFFFFEu));
  EXPECT_FALSE(contiguous_run_base(gap).has_value());
  EXPECT_FALSE(contiguous_run_base(down).has_value());
  EXPECT_FALSE(contiguous_run_base({}).has_value());
}

TEST_F(ShardingTest, SameRunFileForEveryPartitioning) {
  for (Mode mode : {Mode::kAnd, Mode::kOr, Mode::kAndOr}) {
    for (Scoring scoring : {Scoring::kBm25, Scoring::kBm25Pr}) {
      for (unsigned k : {10u, 100u}) {
        const std::string base = run("one", mode, scoring, k);
        ASSERT_GT(base.size(), 1000u);
        for (const std::string idx : {"2-input-ranges", "2-gs-tiers", "5-input-ranges",
                                      "5-gs-tiers", "2-round-robin", "5-round-robin",
                                      "two-built", "bp128"}) {
          EXPECT_EQ(run(idx, mode, scoring, k), base)
              << idx << " " << to_string(mode) << " " << to_string(scoring) << " k=" << k;
        }
      }
    }
  }
}

}  // namespace
