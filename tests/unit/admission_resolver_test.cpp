// The aggregator's admission resolver (aggregator/admission_resolver.hpp) gives, on one thread
// or several, exactly what resolve_query gives for every query, in the arrival order, with the
// query's cost (its terms' smallest df): valid queries, queries of unknown terms only, and the
// ones it must refuse (empty, too many distinct terms, too long), each with its problem.
#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <string>
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

// --admission-threads auto: the MPI thread alone for small batches and small machines; a quarter
// of the cores, at most 4, for batches of 128 queries and more.
TEST(AdmissionResolver, AutoThreadsByBatchSizeAndCores) {
  EXPECT_EQ(AdmissionResolver::auto_threads(64, 16), 1u);
  EXPECT_EQ(AdmissionResolver::auto_threads(127, 64), 1u);
  EXPECT_EQ(AdmissionResolver::auto_threads(128, 16), 4u);
  EXPECT_EQ(AdmissionResolver::auto_threads(1024, 16), 4u);
  EXPECT_EQ(AdmissionResolver::auto_threads(1024, 128), 4u);
  EXPECT_EQ(AdmissionResolver::auto_threads(1024, 8), 2u);
  EXPECT_EQ(AdmissionResolver::auto_threads(1024, 2), 1u);
  EXPECT_EQ(AdmissionResolver::auto_threads(1024, 1), 1u);
}
