// Planning only between serving calls (common/serving_gaps, common/online_cache_policy): a pause
// point blocks while a call is in flight and never the other way round; the online policy's
// replay and admission stop there and resume after the call with the same result; a policy
// destroyed while paused stops. No timing is asserted: each test waits (with a generous bound
// that only a hang reaches) until a thread is seen waiting, then checks what it has not done.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <atomic>
#include <chrono>
#include <functional>
#include <iostream>
#include <thread>

#include "common/cache_admission.hpp"
#include "common/list_cache.hpp"
#include "common/online_cache_policy.hpp"
#include "common/reference_engine.hpp"
#include "common/result_compare.hpp"
#include "common/serving_gaps.hpp"
#include "common/shard_index.hpp"
#include "isn/cached_cpu_engine.hpp"
#include "partition/index_builder.hpp"
#include "partition/synthetic_collection.hpp"
#include "test_support.hpp"

using namespace gpusearch;
using gpusearch::testing::eventually;
using gpusearch::testing::TempDir;

namespace {

TEST(ServingGaps, APausePointWaitsOnlyWhileACallIsInFlight) {
  ServingGaps gaps;
  EXPECT_TRUE(gaps.pause_point());  // between calls: at once
  EXPECT_EQ(gaps.pauses(), 0u);
  std::atomic<bool> passed{false};
  gaps.call_begins();
  gaps.call_begins();  // two calls overlap (two engine threads)
  EXPECT_TRUE(gaps.in_call());
  std::thread worker([&] {
    EXPECT_TRUE(gaps.pause_point());
    passed = true;
  });
  ASSERT_TRUE(eventually([&] { return gaps.waiting() == 1; }));
  EXPECT_FALSE(passed);
  gaps.call_ends();  // one call still in flight: the gap has not begun
  EXPECT_TRUE(gaps.in_call());
  EXPECT_FALSE(passed);
  EXPECT_EQ(gaps.waiting(), 1u);
  gaps.call_ends();
  worker.join();
  EXPECT_TRUE(passed);
  EXPECT_FALSE(gaps.in_call());
  EXPECT_EQ(gaps.calls(), 2u);
  EXPECT_EQ(gaps.pauses(), 1u);
  EXPECT_GE(gaps.paused_seconds(), 0.0);
  {
    const ServingGaps::Call call(&gaps);  // marks one call for its scope
    EXPECT_TRUE(gaps.in_call());
  }
  EXPECT_FALSE(gaps.in_call());
  const ServingGaps::Call none(nullptr);  // no gaps: nothing
  EXPECT_EQ(gaps.calls(), 3u);
}

TEST(ServingGaps, StopReleasesAWaiterAndNoPausePointBlocksAfterIt) {
  ServingGaps gaps;
  gaps.call_begins();
  std::atomic<int> result{-1};
  std::thread worker([&] { result = gaps.pause_point() ? 1 : 0; });
  ASSERT_TRUE(eventually([&] { return gaps.waiting() == 1; }));
  gaps.stop();
  worker.join();
  EXPECT_EQ(result, 0) << "a stopped pause point tells its caller to cut its work short";
  EXPECT_FALSE(gaps.pause_point());  // still in a call, but stopped: no wait
  gaps.call_ends();
  EXPECT_FALSE(gaps.pause_point());
}

// One index for the policy's tests: a 20k-document shard, its training log and a drifting log.
class OnlineCacheGaps : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    tmp_ = new TempDir;
    const SyntheticParams spec = SyntheticParams::parse(
        "docs=20000,seed=9,train_queries=2000,test_queries=6000,mean_length=250,query_drift=1,"
        "drift_ramp=0.5,drift_topics=8");
    BuildOptions bo;
    bo.out_dir = *tmp_ / "idx";
    bo.progress = false;
    build_index_synthetic(spec, bo);
    index_ = new Index(Index::open(*tmp_ / "idx"));
    const SyntheticCollection collection(spec);
    train_ = new std::vector<Query>(resolve(collection.queries(true)));
    drifting_ = new std::vector<Query>(resolve(collection.queries(false)));
  }
  static void TearDownTestSuite() {
    delete drifting_;
    delete train_;
    delete index_;
    delete tmp_;
  }
  static std::vector<Query> resolve(const std::vector<std::pair<std::string, std::string>>& log) {
    std::vector<Query> out;
    for (const auto& [id, text] : log) {
      Query q;
      QueryProblem p;
      if (resolve_query(shard(), QueryText{id, text, 0, {}}, {}, q, p, "log") && !q.terms.empty())
        out.push_back(std::move(q));
    }
    return out;
  }
  static const ShardIndex& shard() { return index_->shard(0); }
  static std::uint64_t budget() { return shard().postings().size_bytes() / 10; }
  static OnlinePolicyOptions options() {
    OnlinePolicyOptions o;
    o.budget_bytes = budget();
    o.k = 10;
    o.half_life_queries = 4000;
    o.replan_queries = 200;
    o.max_pending = 100000;  // nothing dropped
    o.min_payoff = 0;        // every plan: these tests are about when the planner runs
    o.planner_priority = PlannerPriority::kNormal;
    return o;
  }
  static inline TempDir* tmp_ = nullptr;
  static inline Index* index_ = nullptr;
  static inline std::vector<Query>*train_ = nullptr, *drifting_ = nullptr;
};

TEST_F(OnlineCacheGaps, PlannerReplaysNothingWhileACallIsServedAndCatchesUpAfter) {
  const std::span<const Query> served(drifting_->data(), 500);
  for (unsigned threads : {1u, 2u}) {
    OnlinePolicyOptions o = options();
    o.planner_threads = threads;
    OnlineCachePolicy online(shard(), o);
    online.seed(*train_);
    ASSERT_TRUE(online.take_plan().has_value());
    {
      const OnlineCachePolicy::ServingCall call(online.serving_gaps());
      online.observe(served);  // as the engine does, at the end of its call
      ASSERT_TRUE(
          eventually([&] { return online.stats()["planner_pauses"].get<std::uint64_t>() >= 1; }));
      const nlohmann::json during = online.stats();
      EXPECT_EQ(during["replayed"].get<std::uint64_t>(), 0u) << during.dump();
      EXPECT_EQ(during["plans"].get<std::uint64_t>(), 1u) << "the seeded plan only";
      EXPECT_FALSE(online.take_plan().has_value());
    }
    online.drain();  // between calls: the planner catches up
    const nlohmann::json after = online.stats();
    EXPECT_EQ(after["replayed"].get<std::uint64_t>(), served.size()) << after.dump();
    EXPECT_EQ(after["plans"].get<std::uint64_t>(), 1u + served.size() / o.replan_queries + 1)
        << "two full plans and the drain's" << after.dump();
    EXPECT_TRUE(online.take_plan().has_value());
    EXPECT_EQ(after["serving_calls"].get<std::uint64_t>(), 1u);
    EXPECT_TRUE(after["pause_while_serving"].get<bool>());
  }
  // Told not to pause, the planner works through a call (the earlier behaviour).
  OnlinePolicyOptions o = options();
  o.pause_while_serving = false;
  OnlineCachePolicy online(shard(), o);
  const OnlineCachePolicy::ServingCall call(online.serving_gaps());
  online.observe(served);
  online.drain();
  EXPECT_EQ(online.stats()["replayed"].get<std::uint64_t>(), served.size());
  EXPECT_EQ(online.stats()["planner_pauses"].get<std::uint64_t>(), 0u);
}

TEST_F(OnlineCacheGaps, APolicyDestroyedWhilePausedForACallStops) {
  auto online = std::make_unique<OnlineCachePolicy>(shard(), options());
  online->call_begins();  // never ended
  online->observe(std::span<const Query>(drifting_->data(), 300));
  ASSERT_TRUE(
      eventually([&] { return online->stats()["planner_pauses"].get<std::uint64_t>() >= 1; }));
  online.reset();  // joins the planner: a hang here fails the test by ctest's timeout
  SUCCEED();
}

// The admission stops at its pause points during a call and, resumed, admits what it admits
// without pauses.
TEST_F(OnlineCacheGaps, AnAdmissionPausedForACallAdmitsTheSamePlan) {
  VisitLog visits;
  for (const Query& q : *drifting_) {
    for (TermId t : q.terms) visits[t].query_frequency += 1;
    for (const ListRead& r : simulate_and_reads(shard(), q, 10, Scoring::kBm25))
      visits[r.term].prefixes.push_back({r.blocks, 1.0});
  }
  const AdmissionOptions ao{CachePolicy::kVfb, 1.0, budget()};
  VisitLog copy = visits;
  const std::vector<CachedList> plain = admit_lists(shard(), copy, ao);
  ASSERT_GT(plain.size(), 10u);
  ServingGaps gaps;
  gaps.call_begins();
  std::vector<CachedList> paused;
  std::atomic<bool> done{false};
  std::thread planner([&] {
    paused = admit_lists(shard(), visits, ao, &gaps);
    done = true;
  });
  ASSERT_TRUE(eventually([&] { return gaps.waiting() == 1 || done; }));
  EXPECT_FALSE(done) << "the admission went through a call without a pause";
  gaps.call_ends();
  planner.join();
  EXPECT_GE(gaps.pauses(), 1u);
  ASSERT_EQ(paused.size(), plain.size());
  for (std::size_t i = 0; i < plain.size(); ++i) {
    EXPECT_EQ(paused[i].term, plain[i].term);
    EXPECT_EQ(paused[i].blocks, plain[i].blocks);
  }
}

// The generator's log that drifts more (drift_ramp=0.5: the second half is all the other mix;
// drift_topics=8: which also asks for other topics) served on the CPU twin in calls the policy
// is told of, as the GPU engine tells it, with the gate as shipped: plans made between the calls
// pay for their copies, go in, and the drifted half hits more than under the offline plan. Every
// answer checked is the reference's. Plans are awaited between calls (drain, outside a call), so
// the counts do not depend on this machine's speed.
TEST_F(OnlineCacheGaps, ServedInMarkedCallsTheGatedPolicyFollowsALogThatDriftsMore) {
  const unsigned k = 10;
  const SearchParams params{Mode::kAnd, Scoring::kBm25, index_->params().gs_alpha, k};
  const auto offline_plan =
      plan_shard_cache(shard(), *train_, {CachePolicy::kVfb, 1.0, budget()}, k, Scoring::kBm25);
  const DeviceBlockNumbering numbering(shard());
  struct Run {
    double second = 0;  // byte hit rate of the log's second half
    std::size_t changes = 0, wrong = 0;
    nlohmann::json stats;
  };
  auto serve = [&](bool online_policy) {
    Run run;
    ListCacheDirectory cache(shard(), numbering, budget());
    cache.apply(offline_plan);
    CachedCpuEngine twin(shard(), 0, cache, {4096, budget() / 4});
    std::unique_ptr<OnlineCachePolicy> online;
    if (online_policy) {
      OnlinePolicyOptions o = options();
      o.min_payoff = 1;  // the gate as shipped
      o.min_gain = 0.02;
      o.max_pending = 500;
      online = std::make_unique<OnlineCachePolicy>(shard(), o);
      online->seed(*train_);
      online->take_plan();  // the offline plan's equal: the cache holds that
      online->report_cache(cache.held_lists());
    }
    const std::vector<Query>& log = *drifting_;
    const std::size_t call = 1000, half = log.size() / 2;
    ListCacheCounters at_half;
    for (std::size_t b = 0; b < log.size(); b += call) {
      if (online) {
        online->drain();
        if (auto plan = online->take_plan()) {
          cache.apply(*plan, budget() / 4);
          online->report_cache(cache.held_lists());
          ++run.changes;
        }
      }
      const std::size_t n = std::min(call, log.size() - b);
      const std::span<const Query> qs(log.data() + b, n);
      std::vector<ShardResult> out(n);
      {
        const OnlineCachePolicy::ServingCall serving(online ? online->serving_gaps() : nullptr);
        twin.search(qs, params, out);
        if (online) online->observe(qs);  // as the engine does, at the end of its call
      }
      for (std::size_t i = 0; i < n; i += 97) {
        const ReferenceAnswer ref = reference_answer(*index_, qs[i], params, 2 * k + 20);
        const ShardResult* r = &out[i];
        const QueryResult m =
            merge_shard_results(params, std::span<const ShardResult* const>(&r, 1));
        run.wrong += compare_top_k(ref.hits, ref.total_matches, k, m.hits).has_value();
      }
      if (b < half && b + n >= half) at_half = twin.counters();
    }
    const ListCacheCounters& all = twin.counters();
    const double hit = double(all.bytes_hit - at_half.bytes_hit),
                 shipped = double(all.bytes_shipped - at_half.bytes_shipped);
    run.second = hit + shipped > 0 ? hit / (hit + shipped) : 0;
    if (online) run.stats = online->stats();
    return run;
  };
  const Run offline = serve(false), online = serve(true);
  EXPECT_EQ(offline.wrong, 0u);
  EXPECT_EQ(online.wrong, 0u);
  EXPECT_EQ(online.stats["serving_calls"].get<std::uint64_t>(), (drifting_->size() + 999) / 1000);
  EXPECT_GE(online.changes, 1u) << online.stats.dump();
  EXPECT_GT(online.second, offline.second + 0.02) << "online " << online.second << ", offline "
                                                  << offline.second << "; " << online.stats.dump();
  std::cout << "log that drifts more, second half's byte hit rate: offline " << offline.second
            << ", online " << online.second << " (" << online.changes << " changes); "
            << online.stats.dump() << "\n";
}

}  // namespace
