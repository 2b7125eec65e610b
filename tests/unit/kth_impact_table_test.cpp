// KthImpactTable (common/kth_impact_table.hpp): every stored bound is at most the list's real
// K-th largest impact (computed here from the whole decoded list), equal to it up to the float
// rounding where the table decoded the whole list, and a query k takes the smallest K >= k.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <vector>

#include "common/kth_impact_table.hpp"
#include "common/scoring.hpp"
#include "partition/index_builder.hpp"
#include "test_support.hpp"

using namespace gpusearch;
using gpusearch::testing::TempDir;

namespace {

std::vector<double> sorted_impacts(const ShardIndex& shard, TermId t) {
  std::vector<DocId> docs;
  std::vector<std::uint32_t> freqs;
  shard.decode_list(t, docs, freqs);
  const IndexParams& p = shard.params();
  std::vector<double> out;
  for (std::size_t i = 0; i < docs.size(); ++i)
    out.push_back(impact(freqs[i], length_norm(p.bm25, shard.doc_lengths()[docs[i]],
                                               p.collection.avg_doc_length)));
  std::sort(out.begin(), out.end(), std::greater<double>());
  return out;
}

}  // namespace

TEST(KthImpactTable, BoundsAreLowerBoundsOfEveryListsKthImpact) {
  TempDir tmp;
  BuildOptions o;
  o.progress = false;
  o.out_dir = tmp / "idx";
  build_index_synthetic(
      SyntheticParams::parse("docs=20000,seed=5,mean_length=150,train_queries=1,test_queries=1"),
      o);
  const Index index = Index::open(tmp / "idx");
  const ShardIndex& shard = index.shard(0);
  const KthImpactTable table(shard);
  ASSERT_EQ(table.num_terms(), shard.num_terms());
  const std::uint32_t whole_list_blocks =
      (KthImpactTable::kLadder.back() + kBlockSize - 1) / kBlockSize + KthImpactTable::kExtraBlocks;
  std::size_t long_lists = 0, exact_entries = 0, loose_entries = 0;
  for (TermId t = 0; t < shard.num_terms(); ++t) {
    const TermInfo& ti = shard.term(t);
    if (ti.df_shard == 0) continue;
    const std::vector<double> real = sorted_impacts(shard, t);
    for (const std::uint32_t K : KthImpactTable::kLadder) {
      const double bound = table.lower_bound(t, K);
      if (K > ti.df_shard) {
        EXPECT_EQ(bound, 0.0) << "term " << t << " K " << K;
        continue;
      }
      ASSERT_LE(bound, real[K - 1]) << "term " << t << " K " << K << " df " << ti.df_shard;
      EXPECT_GT(bound, 0.0) << "term " << t << " K " << K;
      if (ti.num_blocks <= whole_list_blocks) {
        EXPECT_NEAR(bound, real[K - 1], real[K - 1] * 1e-6) << "term " << t << " K " << K;
        ++exact_entries;
      } else if (bound < real[K - 1] * (1 - 1e-6)) {
        ++loose_entries;
      }
    }
    if (ti.num_blocks > whole_list_blocks) ++long_lists;
  }
  // The index must exercise both cases: lists decoded whole and lists sampled by block maxima.
  EXPECT_GT(long_lists, 10u);
  EXPECT_GT(exact_entries, 1000u);
  std::printf("[ info ] %zu long lists, %zu exact entries, %zu loose entries\n", long_lists,
              exact_entries, loose_entries);
}

TEST(KthImpactTable, QueryKTakesTheNextLadderStepAndNothingPastIt) {
  TempDir tmp;
  BuildOptions o;
  o.progress = false;
  o.out_dir = tmp / "idx";
  build_index_synthetic(
      SyntheticParams::parse("docs=20000,seed=6,mean_length=150,train_queries=1,test_queries=1"),
      o);
  const Index index = Index::open(tmp / "idx");
  const ShardIndex& shard = index.shard(0);
  const KthImpactTable table(shard);
  TermId longest = 0;
  for (TermId t = 0; t < shard.num_terms(); ++t)
    if (shard.term(t).df_shard > shard.term(longest).df_shard) longest = t;
  ASSERT_GT(shard.term(longest).df_shard, 1000u);
  EXPECT_EQ(table.lower_bound(longest, 7), table.lower_bound(longest, 10));
  EXPECT_EQ(table.lower_bound(longest, 11), table.lower_bound(longest, 20));
  EXPECT_GE(table.lower_bound(longest, 1), table.lower_bound(longest, 1000));
  EXPECT_GT(table.lower_bound(longest, 1000), 0.0);
  EXPECT_EQ(table.lower_bound(longest, 1001), 0.0);
  EXPECT_EQ(table.lower_bound(longest, 0), 0.0);
  EXPECT_EQ(table.lower_bound(shard.num_terms() + 5, 10), 0.0);  // not a term of the shard
}
