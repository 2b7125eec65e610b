// The aggregator's parts that need no MPI: batch cutting (size, wait, cost buckets), the LRU
// result cache and its key, and the run comparison the MPI tests rely on.
#include <gtest/gtest.h>

#include "aggregator/batcher.hpp"
#include "aggregator/result_cache.hpp"
#include "common/result_compare.hpp"

using namespace gpusearch;

namespace {
PendingQuery pq(std::string id, double cost, AggregatorClock::time_point t) {
  PendingQuery q;
  q.id = std::move(id);
  q.cost = cost;
  q.arrival = t;
  return q;
}
}  // namespace

TEST(Batcher, CutsBySizeOrByWaitOrOnFlush) {
  const auto t0 = AggregatorClock::now();
  Batcher b({3, 1000, false});
  EXPECT_FALSE(b.due(t0, true));  // nothing waits
  b.add(pq("a", 1, t0));
  b.add(pq("b", 1, t0));
  EXPECT_FALSE(b.due(t0, false));
  EXPECT_TRUE(b.due(t0 + std::chrono::microseconds(1000), false));  // the oldest waited enough
  EXPECT_TRUE(b.due(t0, true));
  b.add(pq("c", 1, t0));
  b.add(pq("d", 1, t0));
  EXPECT_TRUE(b.due(t0, false));  // a full batch waits
  const auto batch = b.cut();
  ASSERT_EQ(batch.size(), 3u);
  EXPECT_EQ(batch[0].id, "a");
  EXPECT_EQ(batch[2].id, "c");
  EXPECT_EQ(b.size(), 1u);
}

TEST(Batcher, CostBucketsKeepTheOldestAndItsNearestCosts) {
  const auto t0 = AggregatorClock::now();
  Batcher b({3, 1000, true});
  const double costs[] = {10, 100000, 12, 90000, 5, 11};
  for (int i = 0; i < 6; ++i) b.add(pq("q" + std::to_string(i), costs[i], t0));
  auto first = b.cut();
  ASSERT_EQ(first.size(), 3u);
  EXPECT_EQ(first[0].id, "q0");  // the oldest always goes
  std::vector<std::string> ids;
  for (auto& q : first) ids.push_back(q.id);
  std::sort(ids.begin(), ids.end());
  EXPECT_EQ(ids, (std::vector<std::string>{"q0", "q2", "q5"}));  // costs 10, 12, 11
  auto second = b.cut();
  ASSERT_EQ(second.size(), 3u);
  EXPECT_EQ(second[0].id, "q1");  // now the oldest
  EXPECT_TRUE(b.empty());
}

TEST(ResultCache, EvictsTheLeastRecentlyUsed) {
  ResultCache c(2);
  c.insert("a", {{{"d1", 1.0}}, false});
  c.insert("b", {{{"d2", 2.0}}, false});
  ASSERT_TRUE(c.find("a"));  // a is now the most recent
  c.insert("c", {{}, true});
  EXPECT_FALSE(c.find("b"));
  ASSERT_TRUE(c.find("a"));
  EXPECT_EQ(c.find("a")->hits.at(0).docid, "d1");
  EXPECT_TRUE(c.find("c")->answered_by_or);
  EXPECT_EQ(c.evictions(), 1u);
  ResultCache off(0);
  off.insert("a", {});
  EXPECT_FALSE(off.find("a"));
}

TEST(ResultCache, KeyKeepsTermOrderAndEveryParameter) {
  const SearchParams p{Mode::kOr, Scoring::kBm25, 0.3, 10};
  const auto k = result_cache_key(p, {"a", "b"});
  EXPECT_NE(k, result_cache_key(p, {"b", "a"}));  // scores sum in query-term order
  EXPECT_NE(k, result_cache_key({Mode::kAnd, Scoring::kBm25, 0.3, 10}, {"a", "b"}));
  EXPECT_NE(k, result_cache_key({Mode::kOr, Scoring::kBm25Pr, 0.3, 10}, {"a", "b"}));
  EXPECT_NE(k, result_cache_key({Mode::kOr, Scoring::kBm25, 0.4, 10}, {"a", "b"}));
  EXPECT_NE(k, result_cache_key({Mode::kOr, Scoring::kBm25, 0.3, 11}, {"a", "b"}));
  EXPECT_NE(result_cache_key(p, {"ab"}), result_cache_key(p, {"a", "b"}));
  EXPECT_EQ(k, result_cache_key(p, {"a", "b"}));
}

TEST(CompareRuns, AcceptsTieSwapsRejectsDifferences) {
  using Run = std::map<std::string, std::vector<RunEntry>>;
  const Run ref = {{"1", {{"a", 1, 5.0}, {"b", 2, 4.0}, {"c", 3, 4.0}, {"d", 4, 3.0}}}};
  EXPECT_TRUE(compare_runs(ref, ref).equal());
  EXPECT_TRUE(
      compare_runs(ref, Run{{"1", {{"a", 1, 5.0}, {"c", 2, 4.0}, {"b", 3, 4.0}, {"d", 4, 3.0}}}})
          .equal());
  EXPECT_FALSE(
      compare_runs(ref, Run{{"1", {{"a", 1, 5.0}, {"b", 2, 4.0}, {"e", 3, 4.0}, {"d", 4, 3.0}}}})
          .equal());
  EXPECT_FALSE(
      compare_runs(ref, Run{{"1", {{"a", 1, 5.0}, {"b", 2, 4.0}, {"c", 3, 4.0}}}}).equal());
  EXPECT_FALSE(
      compare_runs(ref, Run{{"1", {{"a", 1, 5.0}, {"b", 2, 4.1}, {"c", 3, 4.0}, {"d", 4, 3.0}}}})
          .equal());
  EXPECT_FALSE(compare_runs(ref, Run{}).equal());
  EXPECT_FALSE(compare_runs(Run{}, ref).equal());
  // At the cut-off, another document with the tied score passes.
  EXPECT_TRUE(
      compare_runs(ref, Run{{"1", {{"a", 1, 5.0}, {"b", 2, 4.0}, {"c", 3, 4.0}, {"x", 4, 3.0}}}})
          .equal());
}
