// The aggregator's parts that need no MPI: batch cutting (size, wait, cost buckets), the LRU
// result cache and its key, and the run comparison the MPI tests rely on.
#include <gtest/gtest.h>

#include <thread>

#include "aggregator/batcher.hpp"
#include "aggregator/in_flight_batches.hpp"
#include "aggregator/pipeline_depth_model.hpp"
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

// Just in time the batcher holds exactly the next batch: it leaves whole, in arrival order,
// with cost buckets on too (they choose among more queries than a batch only).
TEST(Batcher, ExactlyOneBatchWaitingLeavesWholeInArrivalOrder) {
  const auto t0 = AggregatorClock::now();
  for (bool buckets : {false, true}) {
    Batcher b({4, 1000, buckets});
    const double costs[] = {10, 100000, 12, 5};
    for (int i = 0; i < 4; ++i) b.add(pq("q" + std::to_string(i), costs[i], t0));
    const auto batch = b.cut();
    ASSERT_EQ(batch.size(), 4u);
    for (int i = 0; i < 4; ++i) EXPECT_EQ(batch[std::size_t(i)].id, "q" + std::to_string(i));
    EXPECT_EQ(batch[1].cost, 100000);
    EXPECT_TRUE(b.empty());
    b.add(pq("late", 1, t0));  // fewer than a batch, flushed: the same
    const auto rest = b.cut();
    ASSERT_EQ(rest.size(), 1u);
    EXPECT_EQ(rest[0].id, "late");
    EXPECT_TRUE(b.empty());
  }
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

TEST(Batcher, ABatchHoldsOneSetOfParams) {
  const auto t0 = AggregatorClock::now();
  Batcher b({4, 1000, false});
  for (int i = 0; i < 6; ++i) {
    PendingQuery q = pq("q" + std::to_string(i), 1, t0);
    q.params.k = i % 2 == 0 ? 10 : 100;  // live requests choose their own k
    b.add(std::move(q));
  }
  auto first = b.cut();
  ASSERT_EQ(first.size(), 3u);
  for (auto& q : first) EXPECT_EQ(q.params.k, 10u) << q.id;
  EXPECT_EQ(first[0].id, "q0");
  EXPECT_EQ(first[2].id, "q4");
  auto second = b.cut();
  ASSERT_EQ(second.size(), 3u);
  for (auto& q : second) EXPECT_EQ(q.params.k, 100u) << q.id;
  EXPECT_TRUE(b.empty());
}

TEST(Batcher, ADeadlineCutsTheBatchEarly) {
  // Wait-based cut at 50 ms; a query due 20 ms after arrival, with a 5 ms service time, makes
  // the batch due at 15 ms: before that the batch waits, after it the query leads the batch.
  const auto t0 = AggregatorClock::now();
  Batcher b({64, 50000, false});
  b.set_service_time(std::chrono::milliseconds(5));
  PendingQuery old = pq("old", 1, t0);
  old.params.k = 1000;  // other params: must not hold the urgent query back
  b.add(std::move(old));
  PendingQuery urgent = pq("urgent", 1, t0);
  urgent.deadline = t0 + std::chrono::milliseconds(20);
  b.add(std::move(urgent));
  EXPECT_FALSE(b.due(t0 + std::chrono::milliseconds(14), false));
  EXPECT_TRUE(b.due(t0 + std::chrono::milliseconds(15), false));
  EXPECT_EQ(b.next_due(), t0 + std::chrono::milliseconds(15));
  std::this_thread::sleep_until(t0 + std::chrono::milliseconds(16));
  auto batch = b.cut();
  ASSERT_EQ(batch.size(), 1u);
  EXPECT_EQ(batch[0].id, "urgent");
  EXPECT_EQ(b.deadline_cuts(), 1u);
  EXPECT_EQ(b.size(), 1u);
  EXPECT_EQ(b.next_due(), t0 + std::chrono::milliseconds(50));  // back to the wait-based cut
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
  // A document listed twice fails.
  EXPECT_FALSE(
      compare_runs(ref, Run{{"1", {{"a", 1, 5.0}, {"b", 2, 4.0}, {"b", 3, 4.0}, {"d", 4, 3.0}}}})
          .equal());
  // Near-ties chain: b ~ a and c ~ b within 1e-5 relative, but c !~ a. b and c may swap.
  const Run chain = {{"2", {{"a", 1, 10.0}, {"b", 2, 9.99992}, {"c", 3, 9.99984}, {"d", 4, 5.0}}}};
  EXPECT_TRUE(
      compare_runs(
          chain, Run{{"2", {{"a", 1, 10.0}, {"c", 2, 9.99984}, {"b", 3, 9.99992}, {"d", 4, 5.0}}}})
          .equal());
  // ... but a and c may not (c's score is not near rank 1's).
  EXPECT_FALSE(
      compare_runs(
          chain, Run{{"2", {{"c", 1, 9.99984}, {"b", 2, 9.99992}, {"a", 3, 10.0}, {"d", 4, 5.0}}}})
          .equal());
}

// The just-in-time cut's aim: a quantile (nearest rank) of the last 64 samples.
TEST(SlidingQuantile, NearestRankOverTheLastWindow) {
  SlidingQuantile w;
  EXPECT_EQ(w.size(), 0u);
  EXPECT_EQ(w.quantile(0.9), 0.0);
  w.add(5);
  EXPECT_EQ(w.quantile(0.9), 5.0);
  EXPECT_EQ(w.quantile(0.0), 5.0);
  // 1..10 in a scrambled order: the 90th percentile is 9, the median 5, the maximum 10.
  SlidingQuantile t;
  for (double v : {7, 3, 10, 1, 9, 2, 8, 4, 6, 5}) t.add(v);
  EXPECT_EQ(t.size(), 10u);
  EXPECT_EQ(t.quantile(0.9), 9.0);
  EXPECT_EQ(t.quantile(0.5), 5.0);
  EXPECT_EQ(t.quantile(1.0), 10.0);
  EXPECT_EQ(t.quantile(0.0), 1.0);
  EXPECT_EQ(t.quantile(0.91), 10.0);
  // Only the last 64 count: 64 samples of 1000 push 1..10 out.
  for (std::size_t i = 0; i < SlidingQuantile::kWindow; ++i) t.add(1000);
  EXPECT_EQ(t.size(), SlidingQuantile::kWindow);
  EXPECT_EQ(t.quantile(0.0), 1000.0);
  // Then 1..64: the window holds them alone; the 90th percentile is 58 (ceil(0.9 * 64) = 58).
  for (int i = 1; i <= 64; ++i) t.add(i);
  EXPECT_EQ(t.quantile(0.9), 58.0);
  EXPECT_EQ(t.quantile(1.0), 64.0);
  // quantile() leaves the window as it was.
  EXPECT_EQ(t.quantile(0.5), 32.0);
  EXPECT_EQ(t.quantile(0.9), 58.0);
}

// The aim: the batch the next one would queue behind is taken to last the aim's compute (a
// high quantile of the slowest ISN's), the batches before it the mean; no aim, the mean.
TEST(JustInTimeAdmission, AnEncodingOffTheEngineIsOverheadNotOccupancy) {
  // The ISN's engine thread encoded the answer (--answer-thread engine): it was held until the
  // answer was encoded, and the round trip starts there.
  const AnswerSplit on_engine = split_answer(700.0, 40.0, false);
  EXPECT_DOUBLE_EQ(on_engine.occupancy_us, 740.0);
  EXPECT_DOUBLE_EQ(on_engine.encode_overhead_us, 0.0);
  // The MPI thread encoded it (the default): the engine was free at the search's end, and the
  // encoding delays the answer as the wire does.
  const AnswerSplit off_engine = split_answer(700.0, 40.0, true);
  EXPECT_DOUBLE_EQ(off_engine.occupancy_us, 700.0);
  EXPECT_DOUBLE_EQ(off_engine.encode_overhead_us, 40.0);
  // Clocks a microsecond apart never make a negative encoding.
  EXPECT_DOUBLE_EQ(split_answer(700.0, -1.0, true).encode_overhead_us, 0.0);
  EXPECT_DOUBLE_EQ(split_answer(700.0, -1.0, false).occupancy_us, 700.0);
}

TEST(JustInTimeAdmission, AimsBehindTheLastBatchAtTheQuantileOfItsCompute) {
  using us = std::chrono::microseconds;
  const auto t0 = AggregatorClock::time_point{} + std::chrono::seconds(100);
  LatencyModel m;
  m.add(/*compute*/ 1000, /*overhead*/ 200, /*service*/ 1200);
  std::vector<AggregatorClock::time_point> sent = {t0};
  const auto span = [&] { return std::span<const AggregatorClock::time_point>(sent); };
  // The mean: answered at t0 + 1200, the next leaves at t0 + 1000 (offset 0).
  EXPECT_EQ(m.just_in_time_cut(t0, t0 - us(5000), span(), 0.0), t0 + us(1000));
  // Aimed at a 1,600 us compute: it leaves 600 us later, at t0 + 1600; the offset adds to it.
  m.compute_aim_us = 1600;
  EXPECT_EQ(m.just_in_time_cut(t0, t0 - us(5000), span(), 0.0), t0 + us(1600));
  EXPECT_EQ(m.just_in_time_cut(t0, t0 - us(5000), span(), 100.0), t0 + us(1700));
  // Two in flight, the second sent 100 us after the first: the first is answered at its mean
  // (t0 + 1200), the second behind it at the aim (t0 + 2800); the next leaves at t0 + 2600.
  sent = {t0, t0 + us(100)};
  EXPECT_EQ(m.just_in_time_cut(t0 + us(100), t0 - us(5000), span(), 0.0), t0 + us(2600));
  // The oldest overdue and alone: its answer is due now, so the next one leaves at once (a
  // time before now).
  sent = {t0};
  EXPECT_EQ(m.just_in_time_cut(t0 + us(5000), t0 - us(5000), span(), 0.0), t0 + us(5000 - 200));
  // An aim below the mean (a compute that just dropped) is taken as given.
  m.compute_aim_us = 700;
  EXPECT_EQ(m.just_in_time_cut(t0, t0 - us(5000), span(), 0.0), t0 + us(700));
}

// Just-in-time admission: the next batch leaves one overhead before the slowest ISN is predicted
// to answer the last batch in flight, plus the offset (here 10 us early), the ISNs working the
// batches in order.
TEST(JustInTimeAdmission, NextBatchLeavesSoItArrivesAsTheIsnFinishes) {
  using us = std::chrono::microseconds;
  const auto t0 = AggregatorClock::time_point{} + std::chrono::seconds(100);
  LatencyModel m;
  std::vector<AggregatorClock::time_point> sent;
  // Nothing measured, or nothing in flight: cut now.
  EXPECT_EQ(m.just_in_time_cut(t0, t0, std::span<const AggregatorClock::time_point>(sent), -10.0),
            t0);
  m.add(/*compute*/ 1000, /*overhead*/ 200, /*service*/ 1200);
  EXPECT_EQ(m.just_in_time_cut(t0, t0, std::span<const AggregatorClock::time_point>(sent), -10.0),
            t0);
  // One batch sent at t0 (the previous answered long before): answered at t0 + 200 + 1000; the
  // next should leave at t0 + 1200 - 200 - 10.
  sent = {t0};
  const auto span = [&] { return std::span<const AggregatorClock::time_point>(sent); };
  EXPECT_EQ(m.just_in_time_cut(t0, t0 - us(5000), span(), -10.0), t0 + us(990));
  // Two in flight, the second sent 100 us after the first: it waits for the first's compute,
  // so it is answered at t0 + 2200; the third leaves at t0 + 1990.
  sent = {t0, t0 + us(100)};
  EXPECT_EQ(m.just_in_time_cut(t0 + us(100), t0 - us(5000), span(), -10.0), t0 + us(1990));
  // A second sent long after the first was answered does not queue behind it.
  sent = {t0, t0 + us(3000)};
  EXPECT_EQ(m.just_in_time_cut(t0 + us(3000), t0 - us(5000), span(), -10.0), t0 + us(3990));
  // Sent before the previous batch's answers came (t0 + 500): the ISN was busy with that one
  // until t0 + 300, so this one is answered at t0 + 1500.
  sent = {t0};
  EXPECT_EQ(m.just_in_time_cut(t0, t0 + us(500), span(), -10.0), t0 + us(1290));
  // A positive offset aims after the predicted finish: 300 us later here.
  EXPECT_EQ(m.just_in_time_cut(t0, t0 + us(500), span(), 300.0), t0 + us(1600));
  // The oldest overdue (now past its predicted answer): it is due now, the next batch follows
  // one compute later.
  sent = {t0, t0 + us(100)};
  EXPECT_EQ(m.just_in_time_cut(t0 + us(5000), t0 - us(5000), span(), -10.0),
            t0 + us(5000 + 1000 - 200 - 10));
}

// The admission aims at the cut expected by the mean compute: the answers' return (the last one,
// or the first one a spread earlier), no earlier than predicted-finish's landing cut, and never
// later than the aim's cut.
TEST(JustInTimeAdmission, QueriesAreDueWhenTheBatchIsExpectedToLeave) {
  using us = std::chrono::microseconds;
  using TP = AggregatorClock::time_point;
  const auto t0 = TP{} + std::chrono::seconds(100);
  LatencyModel m;
  std::vector<TP> sent;
  const auto span = [&] { return std::span<const TP>(sent); };
  // Nothing measured or nothing in flight: due now (or at an earlier aim).
  EXPECT_EQ(m.expected_cut(t0, t0, span(), t0 + us(50), 0.0, TP::min()), t0);
  m.add(/*compute*/ 1000, /*overhead*/ 200, /*service*/ 1200);
  m.compute_aim_us = 1600;
  EXPECT_EQ(m.expected_cut(t0, t0, span(), t0 - us(50), 0.0, TP::min()), t0 - us(50));
  // One batch sent at t0: by the mean it is back at t0 + 1200, while the aim's cut is at
  // t0 + 1600 (1,600 us of compute less the 200 us overhead) and comes after it.
  sent = {t0};
  const TP aimed = m.just_in_time_cut(t0, t0 - us(5000), span(), 0.0);
  EXPECT_EQ(aimed, t0 + us(1600));
  EXPECT_EQ(m.answers_back(t0, t0 - us(5000), span()), t0 + us(1800));
  // All answers (or one ISN): at the last answer by the mean.
  EXPECT_EQ(m.expected_cut(t0, t0 - us(5000), span(), aimed, 0.0, TP::min()), t0 + us(1200));
  // The first answer, 150 us before the last.
  EXPECT_EQ(m.expected_cut(t0, t0 - us(5000), span(), aimed, 150.0, TP::min()), t0 + us(1050));
  // predicted-finish: no earlier than the landing cut at the mean (t0 + 1000)...
  LatencyModel at_mean = m;
  at_mean.compute_aim_us = 0;
  const TP landing = at_mean.just_in_time_cut(t0, t0 - us(5000), span(), 0.0);
  EXPECT_EQ(landing, t0 + us(1000));
  EXPECT_EQ(m.expected_cut(t0, t0 - us(5000), span(), aimed, 150.0, landing), t0 + us(1050));
  EXPECT_EQ(m.expected_cut(t0, t0 - us(5000), span(), aimed, 400.0, landing), t0 + us(1000));
  // The early compute (a low quantile, 800 us) where set: the last is back at t0 + 1000.
  m.compute_early_us = 800;
  EXPECT_EQ(m.expected_cut(t0, t0 - us(5000), span(), aimed, 0.0, TP::min()), t0 + us(1000));
  EXPECT_EQ(m.expected_cut(t0, t0 - us(5000), span(), aimed, 150.0, landing), t0 + us(1000));
  m.compute_early_us = 0;
  // ... and never after the aim's cut (an aim below the mean).
  EXPECT_EQ(m.expected_cut(t0, t0 - us(5000), span(), t0 + us(900), 0.0, landing), t0 + us(900));
  // Two in flight: the last is back by the mean at t0 + 2200.
  sent = {t0, t0 + us(100)};
  EXPECT_EQ(m.expected_cut(t0 + us(100), t0 - us(5000), span(), TP::max(), 0.0, TP::min()),
            t0 + us(2200));
  // The oldest overdue: due now, so the last is back one compute later.
  EXPECT_EQ(m.expected_cut(t0 + us(5000), t0 - us(5000), span(), TP::max(), 0.0, TP::min()),
            t0 + us(6000));
}

// The spread of a batch's answers: first to last arrival among the ISNs that answered.
TEST(JustInTimeAdmission, AnswerSpreadIsFirstToLastArrival) {
  using us = std::chrono::microseconds;
  const auto t0 = AggregatorClock::time_point{} + std::chrono::seconds(100);
  InFlightBatch b;
  b.messages.resize(3);
  b.times.resize(3);
  EXPECT_EQ(answer_spread_us_of(b), 0.0);
  b.messages[0].emplace();
  b.times[0].arrived = t0 + us(700);
  EXPECT_EQ(answer_spread_us_of(b), 0.0);
  b.messages[2].emplace();
  b.times[2].arrived = t0 + us(200);
  b.times[1].arrived = t0 + us(5000);  // ISN 1 never answered: its time is not read
  EXPECT_DOUBLE_EQ(answer_spread_us_of(b), 500.0);
}
