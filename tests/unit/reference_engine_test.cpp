// The reference engine against the independent brute-force scorer; the exactness comparator;
// the and-or merge across shards.
#include <gtest/gtest.h>

#include <unordered_map>

#include "brute_force.hpp"
#include "common/reference_engine.hpp"
#include "common/result_compare.hpp"
#include "partition/index_builder.hpp"
#include "test_support.hpp"

using namespace gpusearch;
using gpusearch::testing::BruteForceCollection;
using gpusearch::testing::BruteHit;
using gpusearch::testing::TempDir;

namespace {

// Checks the reference engine on `index` against brute force on the same corpus, for every
// query of `queries`, mode, scoring and k. Returns the number of (query, setting) checks.
std::size_t check_against_brute_force(const Index& index, const BruteForceCollection& brute,
                                      const std::vector<QueryText>& queries,
                                      const std::vector<unsigned>& ks) {
  std::unordered_map<std::string, RankedDoc> by_id;
  for (std::size_t s = 0; s < index.num_open_shards(); ++s) {
    const ShardIndex& shard = index.shard(s);
    for (DocId d = 0; d < shard.num_docs(); ++d)
      by_id[std::string(shard.external_id(d))] = {0, shard.global_ranks()[d], std::uint32_t(s), d};
  }
  std::size_t checks = 0;
  for (const QueryText& qt : queries) {
    Query q;
    QueryProblem problem;
    if (!resolve_query(index.shard(0), qt, QueryLimits{}, q, problem, "queries")) continue;
    const auto answers = brute.search(qt.text, 0.3);
    for (Scoring scoring : {Scoring::kBm25, Scoring::kBm25Pr}) {
      const bool pr = scoring == Scoring::kBm25Pr;
      const auto& brute_and = answers.get(true, pr);
      const auto& brute_or = answers.get(false, pr);
      const auto deep_and = to_ranked(brute_and, by_id), deep_or = to_ranked(brute_or, by_id);
      for (Mode mode : {Mode::kAnd, Mode::kOr, Mode::kAndOr}) {
        for (unsigned k : ks) {
          const bool use_or = mode == Mode::kOr || (mode == Mode::kAndOr && brute_and.size() < k);
          const auto& expected = use_or ? brute_or : brute_and;
          const auto& deep = use_or ? deep_or : deep_and;
          SearchParams params{mode, scoring, 0.3, k};
          const ReferenceAnswer got = reference_answer(index, q, params, k);
          EXPECT_EQ(got.total_matches, expected.size()) << qt.id;
          const auto diff = compare_top_k(deep, expected.size(), k, got.hits);
          EXPECT_FALSE(diff.has_value()) << "query " << qt.id << " '" << qt.text << "' mode "
                                         << to_string(mode) << " " << to_string(scoring)
                                         << " k=" << k << ": " << diff.value_or("");
          ++checks;
        }
      }
    }
  }
  return checks;
}

TEST(ReferenceEngine, AgreesWithBruteForceOnSyntheticCollection) {
  TempDir tmp;
  const SyntheticParams p =
      SyntheticParams::parse("docs=2500,seed=21,train_queries=5,test_queries=120,mean_length=150");
  const SyntheticCollection collection(p);
  collection.write(tmp / "coll", false, false);
  BuildOptions o;
  o.out_dir = tmp / "idx";
  o.progress = false;
  o.num_shards = 3;
  build_index_from_corpus({tmp / "coll" / "corpus.jsonl"}, {}, o);
  const Index index = Index::open(tmp / "idx");
  EXPECT_TRUE(index.params().has_links);
  const BruteForceCollection brute((tmp / "coll" / "corpus.jsonl").string());
  const QueryFile queries = read_query_file(tmp / "coll" / "queries.test.tsv");
  ASSERT_TRUE(queries.problems.empty());
  EXPECT_GT(check_against_brute_force(index, brute, queries.queries, {1, 10, 100}), 2000u);
}

RankedDoc doc(double score, GlobalRank rank) { return {score, rank, 0, rank}; }

TEST(CompareTopK, AcceptsExactAnswerAndTieSwapsRejectsErrors) {
  const std::vector<RankedDoc> ref = {doc(5, 1), doc(4, 2), doc(4, 3), doc(3, 4), doc(3, 5)};
  EXPECT_FALSE(compare_top_k(ref, 5, 3, std::vector<RankedDoc>{doc(5, 1), doc(4, 2), doc(4, 3)}));
  // Tie at ranks 2-3 in the other order, and at the cut-off the other tied document.
  EXPECT_FALSE(compare_top_k(ref, 5, 3, std::vector<RankedDoc>{doc(5, 1), doc(4, 3), doc(4, 2)}));
  EXPECT_FALSE(compare_top_k(ref, 5, 4, std::vector<RankedDoc>{doc(5, 1), doc(4, 2), doc(4, 3), doc(3, 5)}));
  // Wrong document, wrong score, too few, duplicate.
  EXPECT_TRUE(compare_top_k(ref, 5, 2, std::vector<RankedDoc>{doc(5, 1), doc(4, 4)}));
  EXPECT_TRUE(compare_top_k(ref, 5, 2, std::vector<RankedDoc>{doc(5, 1), doc(4.1, 2)}));
  EXPECT_TRUE(compare_top_k(ref, 5, 3, std::vector<RankedDoc>{doc(5, 1), doc(4, 2)}));
  EXPECT_TRUE(compare_top_k(ref, 5, 3, std::vector<RankedDoc>{doc(5, 1), doc(4, 2), doc(4, 2)}));
  // Within tolerance is equal.
  EXPECT_FALSE(compare_top_k(ref, 5, 1, std::vector<RankedDoc>{doc(5 * (1 + 1e-7), 1)}));
  // k beyond the matches: exactly all matches.
  EXPECT_FALSE(compare_top_k(ref, 5, 10, ref));
}

TEST(MergeShardResults, AndOrAnswersWithAndOnlyIfShardsTogetherFindK) {
  ShardResult a, b;
  a.hits = {doc(9, 10)};
  a.and_matches = 1;
  a.or_hits = {doc(9, 10), doc(8, 11)};
  b.hits = {doc(7, 20)};
  b.and_matches = 1;
  b.or_hits = {doc(9.5, 21), doc(7, 20)};
  const ShardResult* both[] = {&a, &b};
  SearchParams p{Mode::kAndOr, Scoring::kBm25, 0.3, 2};
  auto r = merge_shard_results(p, both);  // 1 + 1 AND matches >= k = 2: AND
  EXPECT_FALSE(r.answered_by_or);
  ASSERT_EQ(r.hits.size(), 2u);
  EXPECT_EQ(r.hits[0].rank, 10u);
  EXPECT_EQ(r.hits[1].rank, 20u);
  p.k = 3;  // 2 AND matches < 3: OR
  r = merge_shard_results(p, both);
  EXPECT_TRUE(r.answered_by_or);
  ASSERT_EQ(r.hits.size(), 3u);
  EXPECT_EQ(r.hits[0].rank, 21u);
  EXPECT_EQ(r.hits[1].rank, 10u);
  EXPECT_EQ(r.hits[2].rank, 11u);
}

TEST(TopKHeap, KeepsBestKInAnswerOrder) {
  TopKHeap heap(3);
  for (auto d : {doc(1, 5), doc(3, 9), doc(3, 2), doc(0.5, 1), doc(2, 7), doc(3, 4)}) heap.push(d);
  const auto out = heap.take_sorted();
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out[0].rank, 2u);
  EXPECT_EQ(out[1].rank, 4u);
  EXPECT_EQ(out[2].rank, 9u);
}

}  // namespace
