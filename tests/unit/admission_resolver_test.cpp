// The aggregator's admission resolver (aggregator/admission_resolver.hpp) gives, on one thread
// or several, exactly what resolve_query gives for every query, in the arrival order, with the
// query's cost (its terms' smallest df): valid queries, queries of unknown terms only, and the
// ones it must refuse (empty, too many distinct terms, too long), each with its problem.
#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include "aggregator/admission_resolver.hpp"
#include "common/query.hpp"
#include "common/shard_index.hpp"
#include "common/term_dictionary.hpp"
#include "partition/index_builder.hpp"
#include "partition/synthetic_collection.hpp"
#include "test_support.hpp"

using namespace gpusearch;
using gpusearch::testing::TempDir;

TEST(AdmissionResolver, EveryThreadCountResolvesAsResolveQueryInArrivalOrder) {
  TempDir tmp;
  BuildOptions o;
  o.out_dir = tmp / "idx";
  o.progress = false;
  build_index_synthetic(
      SyntheticParams::parse("docs=3000,seed=5,train_queries=2,test_queries=600,mean_length=120"),
      o);
  const Index index = Index::open(tmp / "idx");
  const ShardIndex& shard = index.shard(0);
  const TermDictionary dict(shard);
  const QueryFile f = read_query_file(tmp / "idx" / "queries.test.tsv");
  ASSERT_GE(f.queries.size(), 500u);
  QueryLimits limits;
  limits.max_terms = 6;
  limits.max_text_bytes = 200;

  std::vector<ArrivedQuery> arrived;
  for (const QueryText& t : f.queries) arrived.push_back({t, {}, 0, std::nullopt, {}});
  // Among them, every kind of query the admission must refuse or cannot match.
  const auto add = [&](std::string id, std::string text) {
    ArrivedQuery a;
    a.text.id = std::move(id);
    a.text.text = std::move(text);
    a.text.line = arrived.size() + 1;
    arrived.insert(arrived.begin() + std::ptrdiff_t(arrived.size() / 2), std::move(a));
  };
  add("empty", "  ,; ");
  add("unknown", "qqqqzzzz xxxyyyzzz");
  add("huge", "a1 a2 a3 a4 a5 a6 a7 a8");
  add("long", std::string(300, 'a'));
  add("repeats", f.queries[0].text + " " + f.queries[0].text);

  std::vector<ResolvedQuery> expected(arrived.size());
  std::size_t accepted = 0;
  for (std::size_t i = 0; i < arrived.size(); ++i) {
    ResolvedQuery& e = expected[i];
    e.ok = resolve_query(dict, arrived[i].text, limits, e.query, e.problem, "queries.tsv");
    accepted += e.ok;
    if (e.ok)
      for (TermId t : e.query.terms) e.cost = std::min(e.cost, double(shard.term(t).df_global));
    const std::string& id = arrived[i].text.id;
    if (id == "empty" || id == "huge" || id == "long") {
      EXPECT_FALSE(e.ok) << id;
    }
    if (id == "unknown") {
      EXPECT_TRUE(e.ok && e.query.terms.empty()) << id;
    }
    if (id == "repeats") {
      EXPECT_TRUE(e.ok && !e.query.terms.empty()) << id;
    }
  }
  ASSERT_GT(accepted, arrived.size() / 2);

  for (unsigned threads : {1u, 2u, 4u, 7u}) {
    AdmissionResolver resolver(dict, limits, threads);
    EXPECT_EQ(resolver.threads(), threads);
    std::vector<ResolvedQuery> got;
    // The whole log at once (split over the threads), then rounds of a few (on the caller's).
    resolver.resolve(arrived, "queries.tsv", got);
    ASSERT_EQ(got.size(), arrived.size());
    std::vector<ResolvedQuery> rounds;
    for (std::size_t s = 0; s < arrived.size(); s += 5) {
      std::vector<ResolvedQuery> part;
      resolver.resolve(std::span(arrived).subspan(s, std::min<std::size_t>(5, arrived.size() - s)),
                       "queries.tsv", part);
      for (ResolvedQuery& r : part) rounds.push_back(std::move(r));
    }
    for (const std::vector<ResolvedQuery>* run : {&got, &rounds}) {
      ASSERT_EQ(run->size(), expected.size());
      for (std::size_t i = 0; i < expected.size(); ++i) {
        const ResolvedQuery &e = expected[i], &r = (*run)[i];
        ASSERT_EQ(r.ok, e.ok) << threads << " threads, query " << i;
        EXPECT_EQ(r.query.id, e.query.id) << i;
        EXPECT_EQ(r.query.terms, e.query.terms) << i;
        EXPECT_EQ(r.query.unknown_tokens, e.query.unknown_tokens) << i;
        EXPECT_EQ(r.cost, e.cost) << i;
        EXPECT_EQ(r.problem.message(), e.problem.message()) << i;
      }
    }
  }
}

// --admission-threads auto: the MPI thread alone below 128 queries a batch and on small
// machines; a quarter of the cores, at most 4, for batches of 128 queries and more.
TEST(AdmissionResolver, AutoThreadsByBatchSizeAndCores) {
  EXPECT_EQ(AdmissionResolver::auto_threads(63, 16), 1u);
  EXPECT_EQ(AdmissionResolver::auto_threads(64, 16), 1u);
  EXPECT_EQ(AdmissionResolver::auto_threads(127, 64), 1u);
  EXPECT_EQ(AdmissionResolver::auto_threads(128, 16), 4u);
  EXPECT_EQ(AdmissionResolver::auto_threads(1024, 16), 4u);
  EXPECT_EQ(AdmissionResolver::auto_threads(1024, 128), 4u);
  EXPECT_EQ(AdmissionResolver::auto_threads(1024, 8), 2u);
  EXPECT_EQ(AdmissionResolver::auto_threads(1024, 2), 1u);
  EXPECT_EQ(AdmissionResolver::auto_threads(1024, 1), 1u);
}

// The helpers: told when the next batch comes (expect_batch_at), they wake and take chunks of
// it; batches that come with no helper awake, and batches after an expectation that passed, are
// resolved all the same. Every round equals resolve_query's answers.
TEST(AdmissionResolver, HelpersTakeChunksOfExpectedBatchesAndNothingChanges) {
  TempDir tmp;
  BuildOptions o;
  o.out_dir = tmp / "idx";
  o.progress = false;
  build_index_synthetic(
      SyntheticParams::parse("docs=2000,seed=9,train_queries=2,test_queries=256,mean_length=100"),
      o);
  const Index index = Index::open(tmp / "idx");
  const TermDictionary dict(index.shard(0));
  const QueryFile f = read_query_file(tmp / "idx" / "queries.test.tsv");
  ASSERT_GE(f.queries.size(), 200u);
  std::vector<ArrivedQuery> arrived;
  for (const QueryText& t : f.queries) arrived.push_back({t, {}, 0, std::nullopt, {}});
  QueryLimits limits;
  std::vector<ResolvedQuery> expected(arrived.size());
  for (std::size_t i = 0; i < arrived.size(); ++i)
    expected[i].ok = resolve_query(dict, arrived[i].text, limits, expected[i].query,
                                   expected[i].problem, "q.tsv");

  AdmissionResolver resolver(dict, limits, 3);
  using Clock = AdmissionResolver::Clock;
  std::vector<ResolvedQuery> got;
  const auto check = [&](std::size_t n, const char* what) {
    ASSERT_EQ(got.size(), n) << what;
    for (std::size_t i = 0; i < n; ++i) {
      ASSERT_EQ(got[i].ok, expected[i].ok) << what << ", query " << i;
      ASSERT_EQ(got[i].query.id, expected[i].query.id) << what << ", query " << i;
      ASSERT_EQ(got[i].query.terms, expected[i].query.terms) << what << ", query " << i;
    }
  };
  // Expected now: the helpers poll; a batch of 64 (two chunks) and the whole set. Then a big
  // batch (the set 64 times: a few milliseconds of work), for which the MPI thread wakes a
  // sleeping helper too: on a loaded machine (ctest -j, two cores) a helper may wait for a core
  // longer than a small batch takes, so the rounds go on until a helper took a chunk.
  std::vector<ArrivedQuery> big;
  for (int copy = 0; copy < 64; ++copy) big.insert(big.end(), arrived.begin(), arrived.end());
  std::uint64_t rounds = 0;
  for (; rounds < 40 && resolver.helper_stats().helper_chunks == 0; ++rounds) {
    resolver.expect_batch_at(Clock::now() + std::chrono::microseconds(200));
    std::this_thread::sleep_for(std::chrono::microseconds(300));
    resolver.resolve(std::span(arrived).first(64), "q.tsv", got);
    check(64, "expected batch of 64");
    resolver.resolve(arrived, "q.tsv", got);
    check(arrived.size(), "expected whole set");
    resolver.resolve(big, "q.tsv", got);
    ASSERT_EQ(got.size(), big.size());
    for (std::size_t i = 0; i < big.size(); ++i) {
      const ResolvedQuery& e = expected[i % arrived.size()];
      ASSERT_EQ(got[i].ok, e.ok) << "big batch, query " << i;
      ASSERT_EQ(got[i].query.terms, e.query.terms) << "big batch, query " << i;
    }
  }
  const AdmissionResolver::HelperStats s = resolver.helper_stats();
  EXPECT_GT(s.helper_chunks, 0u) << "no helper took a chunk in " << rounds << " rounds";
  EXPECT_GT(s.batches_helped, 0u);
  EXPECT_EQ(s.split_batches, 3 * rounds);
  EXPECT_LE(s.helper_chunks, s.chunks);
  // An expectation long past: the helpers sleep; the batch is the MPI thread's alone or a
  // woken helper's (the whole set is four chunks or more), and equal all the same.
  resolver.expect_batch_at(Clock::now() - std::chrono::seconds(1));
  std::this_thread::sleep_for(std::chrono::milliseconds(2));
  resolver.resolve(std::span(arrived).first(64), "q.tsv", got);
  check(64, "unexpected batch of 64");
  resolver.resolve(arrived, "q.tsv", got);
  check(arrived.size(), "unexpected whole set");
  // A batch of one chunk and a few queries: the caller's alone.
  const std::uint64_t split_before = resolver.helper_stats().split_batches;
  resolver.resolve(std::span(arrived).first(40), "q.tsv", got);
  check(40, "batch of 40");
  EXPECT_EQ(resolver.helper_stats().split_batches, split_before);
}
