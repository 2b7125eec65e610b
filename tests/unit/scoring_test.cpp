// Tokenizer and scoring formulas against hand-computed values.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/scoring.hpp"
#include "common/tokenizer.hpp"

using namespace gpusearch;

namespace {

std::vector<std::string> tokens(std::string_view text) {
  std::vector<std::string> out;
  for_each_token(text, [&](std::string_view t) { out.emplace_back(t); });
  return out;
}

TEST(Tokenizer, MaximalRunsOfLettersDigitsAndHighBytesLowerCased) {
  EXPECT_EQ(tokens("Hello, World! x86-64 C++20"),
            (std::vector<std::string>{"hello", "world", "x86", "64", "c", "20"}));
  EXPECT_EQ(tokens("caf\xc3\xa9 na\xc3\xafve"), (std::vector<std::string>{"caf\xc3\xa9", "na\xc3\xafve"}));
  EXPECT_EQ(tokens("  \t\n--"), std::vector<std::string>{});
  EXPECT_EQ(tokens("ABC_def"), (std::vector<std::string>{"abc", "def"}));
}

// N = 1000; t1 has df 10, tf 3; t2 has df 100, tf 1; |d| = 100, avgdl = 200; k1 = 1.2, b = 0.75.
//   idf(t1) = ln(1 + 990.5 / 10.5)  = 4.557379522151743
//   idf(t2) = ln(1 + 900.5 / 100.5) = 2.29859705181609
//   k1 * (1 - b + b * 100 / 200) = 1.2 * 0.625 = 0.75
//   bm25 = idf1 * 3 * 2.2 / 3.75 + idf2 * 1 * 2.2 / 1.75 = 10.910652824127297
//   bm25-pr (alpha 0.3, PR' 0.5)
//     = 0.15 + 0.7 * (idf1 / (idf1 + idf2) * 0.8 + idf2 / (idf1 + idf2) / 1.75)
//     = 0.6563569450212214
TEST(Scoring, Bm25MatchesHandComputedValue) {
  EXPECT_NEAR(idf(1000, 10), 4.557379522151743, 1e-12);
  EXPECT_NEAR(idf(1000, 100), 2.29859705181609, 1e-12);
  const Bm25Params p;
  const double norm = length_norm(p, 100, 200.0);
  EXPECT_NEAR(norm, 0.75, 1e-15);
  const std::vector<std::uint32_t> dfs = {10, 100};
  const QueryWeights w = make_query_weights(Scoring::kBm25, 0.3, p, 1000, dfs);
  EXPECT_EQ(w.static_weight, 0.0);
  const double score = w.term_weight[0] * impact(3, norm) + w.term_weight[1] * impact(1, norm);
  EXPECT_NEAR(score, 10.910652824127297, 1e-12);
}

TEST(Scoring, Bm25PageRankMatchesHandComputedValue) {
  const Bm25Params p;
  const double norm = length_norm(p, 100, 200.0);
  const std::vector<std::uint32_t> dfs = {10, 100};
  const QueryWeights w = make_query_weights(Scoring::kBm25Pr, 0.3, p, 1000, dfs);
  const double score = w.static_weight * 0.5 + w.term_weight[0] * impact(3, norm) +
                       w.term_weight[1] * impact(1, norm);
  EXPECT_NEAR(score, 0.6563569450212214, 1e-12);
  EXPECT_NEAR(w.sum_term_weight, 0.7, 1e-15);
}

TEST(Scoring, GlobalScoreBoundsEveryQueryScore) {
  // S(d, q) <= f * GS(d) for the factor of gs_bound_factor, whatever the query's alpha and terms.
  const Bm25Params p;
  const double index_alpha = 0.3;
  for (double query_alpha : {0.0, 0.1, 0.3, 0.6, 0.9}) {
    for (Scoring s : {Scoring::kBm25, Scoring::kBm25Pr}) {
      const std::vector<std::uint32_t> dfs = {3, 50, 700};
      const QueryWeights w = make_query_weights(s, query_alpha, p, 1000, dfs);
      const auto f = gs_bound_factor(w, index_alpha);
      ASSERT_TRUE(f.has_value());
      for (double pr : {0.0, 0.2, 1.0}) {
        for (std::uint32_t tf_max : {1u, 4u, 30u}) {
          const double norm = length_norm(p, 80, 100.0);
          const double max_impact = impact(tf_max, norm);
          double score = w.static_weight * pr;
          for (std::size_t i = 0; i < 3; ++i) score += w.term_weight[i] * impact(1 + (tf_max - 1) * (i == 1), norm);
          EXPECT_LE(score, *f * global_score(index_alpha, pr, max_impact) * (1 + 1e-12));
        }
      }
    }
  }
}

TEST(Scoring, NoGsBoundWhereNoneHolds) {
  const Bm25Params p;
  const std::vector<std::uint32_t> dfs = {3};
  EXPECT_FALSE(gs_bound_factor(make_query_weights(Scoring::kBm25Pr, 0.3, p, 10, dfs), 0.0));
  EXPECT_TRUE(gs_bound_factor(make_query_weights(Scoring::kBm25, 0.3, p, 10, dfs), 0.0));
}

}  // namespace
