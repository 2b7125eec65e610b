// The CPU engine against the reference engine: every algorithm, mode, scoring, k, thread count
// and resume point gives the reference's top-k (compare_top_k), on synthetic indexes of one and
// several shards and on the real collections of the shared data folder; adversarial queries.
// Bounds, seeds and ranges: cpu_engine_bounds_test.cpp; counters, the search session, the
// factory and the top-k: cpu_engine_interface_test.cpp; the fixture: cpu_engine_fixture.hpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>

#include "cpu_engine_fixture.hpp"

using namespace gpusearch;
using namespace gpusearch::cpu_engine_testing;
using gpusearch::testing::TempDir;

namespace {

TEST_F(CpuEngineTest, EveryAlgorithmEqualsTheReferenceOnOneShard) {
  const Index index = open("one");
  EXPECT_GT(check_index(index, queries(index, 40), {1, 10, 100, 1000}, {1},
                        {std::begin(kAlgorithms), std::end(kAlgorithms)}),
            3000u);
}

TEST_F(CpuEngineTest, EveryAlgorithmEqualsTheReferenceOnThreeShards) {
  const Index index = open("three");
  EXPECT_GT(check_index(index, queries(index, 30), {1, 10, 100, 1000}, {1},
                        {std::begin(kAlgorithms), std::end(kAlgorithms)}),
            2000u);
}

TEST_F(CpuEngineTest, EveryAlgorithmEqualsTheReferenceOnGsTiersWithAlphaZero) {
  const Index index = open("tiers");
  EXPECT_GT(check_index(index, queries(index, 30), {1, 10, 100, 1000}, {1},
                        {std::begin(kAlgorithms), std::end(kAlgorithms)}),
            2000u);
}

// bm25-pr with a query-time alpha other than the index's: GS bounds must adapt (or switch off,
// for an index built with alpha 0), and alpha = 1 leaves only the static part.
TEST_F(CpuEngineTest, QueryAlphaOtherThanTheIndexAlpha) {
  for (const char* name : {"one", "tiers"}) {
    const Index index = open(name);
    for (double alpha : {0.0, 0.05, 0.7, 1.0})
      EXPECT_GT(check_index(index, queries(index, 15), {1, 10, 100}, {1, 3},
                            {std::begin(kAlgorithms), std::end(kAlgorithms)}, alpha),
                500u)
          << name << " alpha " << alpha;
  }
}

TEST_F(CpuEngineTest, IntraQueryParallelismKeepsTheAnswer) {
  for (const char* name : {"one", "three"}) {
    const Index index = open(name);
    EXPECT_GT(check_index(index, queries(index, 25), {1, 10, 100, 1000}, {3, 8},
                          {std::begin(kAlgorithms), std::end(kAlgorithms)}),
              1000u);
  }
}

TEST_F(CpuEngineTest, ResumeFromADocIdWithARunningTopK) {
  for (const char* name : {"one", "three"}) {
    const Index index = open(name);
    const auto qs = queries(index, 12);
    for (double frac : {0.0, 0.003, 0.4, 0.999, 1.0})
      EXPECT_GT(check_resume(index, qs, {1, 10, 1000}, frac, 1), 100u);
    EXPECT_GT(check_resume(index, qs, {10, 100}, 0.25, 4), 100u);
  }
}

TEST_F(CpuEngineTest, AdversarialQueries) {
  for (const char* name : {"one", "three", "tiers"}) {
    const Index index = open(name);
    const ShardIndex& s0 = index.shard(0);
    std::vector<Query> qs;
    auto add = [&](std::vector<TermId> terms) {
      Query q;
      q.id = "adv" + std::to_string(qs.size());
      q.terms = std::move(terms);
      qs.push_back(std::move(q));
    };
    // Terms by global df: one-posting lists, lists of one block, long lists, and terms absent
    // from some shard.
    TermId one_posting = kNoDoc, short_list = kNoDoc, long_list = 0, absent_somewhere = kNoDoc;
    for (TermId t = 0; t < s0.num_terms(); ++t) {
      const TermInfo& ti = s0.term(t);
      if (ti.df_global == 1 && one_posting == kNoDoc) one_posting = t;
      if (ti.df_global > 20 && ti.df_global < 100 && short_list == kNoDoc) short_list = t;
      if (ti.df_global > s0.term(long_list).df_global) long_list = t;
      if (ti.df_shard == 0 && ti.df_global > 0 && absent_somewhere == kNoDoc) absent_somewhere = t;
    }
    ASSERT_NE(one_posting, kNoDoc);
    ASSERT_NE(short_list, kNoDoc);
    add({one_posting});             // single term, one posting
    add({short_list});              // single term
    add({long_list});               // single term, every block
    add({one_posting, long_list});  // AND with a one-posting list
    add({short_list, long_list, one_posting});
    add({long_list, long_list});  // duplicate terms (not de-duplicated here)
    add({short_list, long_list, short_list});
    if (absent_somewhere != kNoDoc) {
      add({absent_somewhere});  // absent from shard 0
      add({absent_somewhere, long_list});
    }
    add({});  // no known term
    EXPECT_GT(check_index(index, qs, {1, 10, 100, 1000, 100000}, {1, 4},
                          {std::begin(kAlgorithms), std::end(kAlgorithms)}),
              500u);
  }
}

// The windowed MaxScore at window sizes that put many window edges inside the lists (64), one
// that is not a power of two (700), and one larger than the shards (one window per query).
TEST_F(CpuEngineTest, WindowedMaxScoreAtEveryWindowSize) {
  for (unsigned window : {64u, 700u, 1u << 16}) {
    cpu::CpuEngineOptions o;
    o.window_docs = window;
    o.daat_docs_per_posting = 0;  // the windowed algorithm for every query
    for (const char* name : {"one", "three", "tiers"}) {
      const Index index = open(name);
      EXPECT_GT(check_index(index, queries(index, 25), {1, 10, 100, 1000}, {1, 3},
                            {cpu::Algorithm::kMaxScore}, 0.3, o),
                500u)
          << name << " window " << window;
    }
  }
}

// Real collections (skipped loudly when absent): Cranfield with its own and MS MARCO queries,
// Debian package descriptions with MS MARCO queries.
void check_real(const std::filesystem::path& corpus,
                const std::vector<std::filesystem::path>& query_files, std::size_t per_file) {
  TempDir tmp;
  auto r = gpusearch::testing::run_gpusearch("index --corpus " + corpus.string() +
                                             " --shards 2 --out " + (tmp / "idx").string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const Index index = Index::open(tmp / "idx");
  std::vector<Query> qs;
  for (const auto& f : query_files) {
    auto v = resolve_all(index.shard(0), f, per_file);
    qs.insert(qs.end(), v.begin(), v.end());
  }
  ASSERT_FALSE(qs.empty());
  EXPECT_GT(check_index(index, qs, {1, 10, 100, 1000}, {1, 3},
                        {std::begin(kAlgorithms), std::end(kAlgorithms)}),
            1000u);
  EXPECT_GT(
      check_resume(
          index, std::vector<Query>(qs.begin(), qs.begin() + std::min<std::size_t>(qs.size(), 15)),
          {10, 1000}, 0.3, 1),
      100u);
}

TEST(CpuEngineRealData, CranfieldAndMsMarcoQueries) {
  const auto dir = gpusearch::testing::shared_data("cranfield");
  if (!std::filesystem::exists(dir / "corpus.jsonl"))
    GTEST_SKIP() << "SKIPPED: " << dir
                 << " not found (the shared data folder is not beside the checkout)";
  check_real(
      dir / "corpus.jsonl",
      {dir / "queries.tsv", gpusearch::testing::shared_data("msmarco-queries-sample/queries.tsv")},
      40);
}

TEST(CpuEngineRealData, DebianDescriptions) {
  const auto corpus =
      std::filesystem::path(GPUSEARCH_BINARY_DIR) / "data" / "debian-descriptions.jsonl";
  if (!std::filesystem::exists(corpus))
    GTEST_SKIP()
        << "SKIPPED: " << corpus
        << " not found (launch/test.sh makes it with ../shared/data/make-debian-descriptions.sh)";
  const auto queries = gpusearch::testing::shared_data("msmarco-queries-sample/queries.tsv");
  if (!std::filesystem::exists(queries))
    GTEST_SKIP() << "SKIPPED: " << queries
                 << " not found (the shared data folder is not beside the checkout)";
  check_real(corpus, {queries}, 25);
}

}  // namespace
