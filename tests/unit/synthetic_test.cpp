// The synthetic generator: deterministic by seed, Zipfian terms, query logs shaped like the
// TREC efficiency logs, and AND queries that have answers.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <cmath>
#include <iostream>
#include <map>
#include <set>
#include <sstream>

#include "common/reference_engine.hpp"
#include "partition/index_builder.hpp"
#include "partition/synthetic_collection.hpp"
#include "test_support.hpp"

using namespace gpusearch;
using gpusearch::testing::TempDir;

namespace {

TEST(Synthetic, DocumentsDependOnlyOnSeedAndIndex) {
  const SyntheticParams p = SyntheticParams::parse("docs=1000,seed=9");
  const SyntheticCollection a(p), b(p);
  SyntheticDocument x, y;
  for (std::uint64_t i : {999ull, 0ull, 500ull, 0ull}) {
    a.document(i, x);
    b.document(i, y);
    EXPECT_EQ(x.tokens, y.tokens);
    EXPECT_EQ(x.links, y.links);
  }
  const SyntheticCollection c(SyntheticParams::parse("docs=1000,seed=10"));
  c.document(0, y);
  a.document(0, x);
  EXPECT_NE(x.tokens, y.tokens);
}

TEST(Synthetic, TermStringsAreUniqueLowercaseTokens) {
  std::set<std::string> seen;
  for (std::uint32_t r : {0u, 1u, 84u, 85u, 86u, 7224u, 7225u, 1000000u, 4000000000u}) {
    const std::string s = SyntheticCollection::term_string(r);
    EXPECT_TRUE(seen.insert(s).second) << s;
    for (char ch : s) EXPECT_TRUE(ch >= 'a' && ch <= 'z') << s;
  }
  for (std::uint32_t r = 0; r < 20000; ++r)
    EXPECT_TRUE(seen.insert(SyntheticCollection::term_string(r + 5000000)).second);
}

TEST(Synthetic, ZipfSamplerFollowsPowerLaw) {
  const ZipfSampler z(1000, 1.0);
  Rng rng(1);
  std::map<std::uint64_t, int> count;
  const int n = 400000;
  for (int i = 0; i < n; ++i) ++count[z(rng)];
  double h = 0;
  for (int k = 1; k <= 1000; ++k) h += 1.0 / k;
  for (int k : {1, 2, 10}) EXPECT_NEAR(count[k] / double(n), 1.0 / (k * h), 0.01) << k;
  EXPECT_EQ(count.begin()->first, 1u);
  EXPECT_LE(count.rbegin()->first, 1000u);
}

TEST(Synthetic, QueryLogsLookLikeTrecEfficiencyLogs) {
  TempDir tmp;
  BuildOptions o;
  o.out_dir = tmp / "idx";
  o.progress = false;
  build_index_synthetic(
      SyntheticParams::parse("docs=20000,seed=7,train_queries=2000,test_queries=2000"), o);
  const Index index = Index::open(tmp / "idx");
  const QueryFile f = read_query_file(tmp / "idx" / "queries.test.tsv");
  ASSERT_EQ(f.queries.size(), 2000u);
  std::map<std::string, int> repeats;
  double total_terms = 0;
  std::size_t and_answered = 0, and_run = 0;
  for (const QueryText& qt : f.queries) {
    Query q;
    QueryProblem problem;
    ASSERT_TRUE(resolve_query(index.shard(0), qt, {}, q, problem, "q"));
    const std::size_t words = std::count(qt.text.begin(), qt.text.end(), ' ') + 1;
    EXPECT_GE(words, 1u);
    EXPECT_LE(words, 8u);
    total_terms += double(words);
    ++repeats[qt.text];
    if (q.terms.size() >= 2 && and_run < 300) {
      ++and_run;
      and_answered +=
          reference_answer(index, q, {Mode::kAnd, Scoring::kBm25, 0.3, 10}, 10).total_matches > 0;
    }
  }
  const double mean = total_terms / 2000;
  EXPECT_GT(mean, 2.5);
  EXPECT_LT(mean, 3.5);
  EXPECT_LT(repeats.size(), 2000u);  // popular queries repeat
  EXPECT_GT(double(and_answered) / double(and_run), 0.6) << and_answered << "/" << and_run;
  // Train and test logs differ but share the distribution.
  EXPECT_NE(gpusearch::testing::read_text(tmp / "idx" / "queries.train.tsv"),
            gpusearch::testing::read_text(tmp / "idx" / "queries.test.tsv"));
}

TEST(Synthetic, ParamsParsingRejectsNonsense) {
  EXPECT_THROW(SyntheticParams::parse("docs=0"), InputError);
  EXPECT_THROW(SyntheticParams::parse("docs=ten"), InputError);
  EXPECT_THROW(SyntheticParams::parse("topic_share=2"), InputError);
  EXPECT_THROW(SyntheticParams::parse("docs"), InputError);
  EXPECT_EQ(SyntheticParams::parse("docs=25000000,seed=7").num_docs, 25000000u);
}

// The drift settings that make a log drift more (the online list-cache policy's benchmark):
// drift_ramp reaches the full drift earlier, drift_topics makes the drifted queries ask for
// other topics too. Each takes the last quarter of the log further from the training log
// (query words shared); the training log does not change; bad values are refused.
TEST(SyntheticQueryDrift, ARampAndRotatedTopicsDriftFurther) {
  // Share of the last quarter's query words that the training log asks for.
  auto shared_late = [](const std::string& spec) {
    const SyntheticCollection c(SyntheticParams::parse(spec));
    std::map<std::string, int> trained;
    for (const auto& [id, text] : c.queries(true)) {
      std::istringstream words(text);
      for (std::string w; words >> w;) trained[w] = 1;
    }
    const auto log = c.queries(false);
    std::size_t seen = 0, total = 0;
    for (std::size_t i = log.size() - log.size() / 4; i < log.size(); ++i) {
      std::istringstream words(log[i].second);
      for (std::string w; words >> w; ++total) seen += trained.count(w);
    }
    return double(seen) / double(total);
  };
  const std::string base = "docs=50000,seed=3,train_queries=2000,test_queries=4000,query_drift=1";
  const double plain = shared_late(base), ramp = shared_late(base + ",drift_ramp=0.5"),
               topics = shared_late(base + ",drift_ramp=0.5,drift_topics=8");
  EXPECT_LT(ramp, plain - 0.015) << plain << " " << ramp;
  EXPECT_LT(topics, ramp - 0.02) << ramp << " " << topics;
  std::cout << "query words of the last quarter seen in training: query_drift=1 " << plain
            << ", drift_ramp=0.5 " << ramp << ", drift_topics=8 " << topics << "\n";
  EXPECT_EQ(SyntheticCollection(SyntheticParams::parse(base)).queries(true),
            SyntheticCollection(SyntheticParams::parse(base + ",drift_ramp=0.5,drift_topics=8"))
                .queries(true));
  EXPECT_THROW(SyntheticParams::parse("docs=10,drift_ramp=0"), InputError);
  EXPECT_THROW(SyntheticParams::parse("docs=10,drift_ramp=1.5"), InputError);
  EXPECT_THROW(SyntheticParams::parse("docs=10,drift_topics=1.5"), InputError);
  const auto j =
      SyntheticParams::parse("docs=10,query_drift=1,drift_ramp=0.5,drift_topics=8").to_json();
  EXPECT_EQ(j["drift_ramp"].get<double>(), 0.5);
  EXPECT_EQ(j["drift_topics"].get<unsigned>(), 8u);
  EXPECT_FALSE(SyntheticParams::parse("docs=10,query_drift=1").to_json().contains("drift_ramp"));
}

}  // namespace
