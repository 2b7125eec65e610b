// The cache swapper (common/cache_swapper.hpp) applies the online policy's plans only in the
// gaps between calls: never while a call is marked in flight, and a call that comes during a
// swap waits for it on the engine's mutex. The engine here is a stand-in that does what
// GpuEngine::search does (mark the call, then hold the mutex); the plans are a real policy's.
// No timing is asserted: each test waits (bounded by two minutes, reached only by a hang) for
// what it checks.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <atomic>
#include <chrono>
#include <functional>
#include <mutex>
#include <thread>

#include "common/cache_swapper.hpp"
#include "common/error.hpp"
#include "common/online_cache_policy.hpp"
#include "common/shard_index.hpp"
#include "partition/index_builder.hpp"
#include "partition/synthetic_collection.hpp"
#include "test_support.hpp"

using namespace gpusearch;
using gpusearch::testing::eventually;
using gpusearch::testing::TempDir;

namespace {

class CacheSwapperTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    tmp_ = new TempDir;
    const SyntheticParams spec =
        SyntheticParams::parse("docs=4000,seed=5,train_queries=300,test_queries=300");
    BuildOptions bo;
    bo.out_dir = *tmp_ / "idx";
    bo.progress = false;
    build_index_synthetic(spec, bo);
    index_ = new Index(Index::open(*tmp_ / "idx"));
    train_ = new std::vector<Query>;
    for (const auto& [id, text] : SyntheticCollection(spec).queries(true)) {
      Query q;
      QueryProblem p;
      if (resolve_query(index_->shard(0), QueryText{id, text, 0, {}}, {}, q, p, "train") &&
          !q.terms.empty())
        train_->push_back(std::move(q));
    }
  }
  static void TearDownTestSuite() {
    delete train_;
    delete index_;
    delete tmp_;
  }
  // A policy whose seed() leaves a plan waiting: the swapper's first. Seeding during a marked
  // call needs a planner that does not pause for calls (its admission would wait for the gap).
  static std::unique_ptr<OnlineCachePolicy> policy(bool planner_pauses = true) {
    OnlinePolicyOptions o;
    o.pause_while_serving = planner_pauses;
    o.budget_bytes = index_->shard(0).postings().size_bytes() / 10;
    o.min_payoff = 0;
    o.half_life_queries = 200;
    o.replan_queries = 20;
    o.planner_priority = PlannerPriority::kNormal;
    return std::make_unique<OnlineCachePolicy>(index_->shard(0), o);
  }
  static inline TempDir* tmp_ = nullptr;
  static inline Index* index_ = nullptr;
  static inline std::vector<Query>* train_ = nullptr;
};

// What the engine's apply callback saw.
struct Applies {
  std::atomic<int> count{0};
  std::atomic<int> during_call{0};  // applies while a call was marked in flight
};

TEST_F(CacheSwapperTest, APlanWaitsForTheCallInFlightAndGoesInAfterIt) {
  auto online = policy(/*planner_pauses=*/false);
  ServingGaps& gaps = *online->serving_gaps();
  std::mutex engine_mutex;
  Applies applies;
  CacheSwapper swapper(*online, engine_mutex, [&](std::vector<CachedList>&& plan) {
    EXPECT_FALSE(plan.empty());
    if (gaps.in_call()) ++applies.during_call;
    ++applies.count;
  });
  {
    // A call in flight, as GpuEngine::search holds it: marked, then the mutex.
    const ServingGaps::Call call(&gaps);
    std::lock_guard lock(engine_mutex);
    online->seed(*train_);  // a plan is ready
    ASSERT_TRUE(eventually([&] { return !online->has_plan(); })) << "the swapper takes it";
    ASSERT_TRUE(eventually([&] { return gaps.waiting() == 1; })) << "and waits for a gap";
    EXPECT_EQ(applies.count, 0) << "no plan goes in during a call";
  }
  swapper.settle();  // the gap: it goes in now
  EXPECT_EQ(applies.count, 1);
  EXPECT_EQ(applies.during_call, 0);
  const nlohmann::json s = swapper.stats();
  EXPECT_EQ(s["swaps"].get<std::uint64_t>(), 1u);
  EXPECT_EQ(s["swap"], "gaps");
  EXPECT_GT(s["gap_wait_seconds"].get<double>(), 0.0);
}

TEST_F(CacheSwapperTest, ACallThatComesDuringASwapWaitsForItAndSeesItWhole) {
  auto online = policy();
  ServingGaps& gaps = *online->serving_gaps();
  std::mutex engine_mutex;
  std::atomic<bool> applying{false}, applied{false}, release{false};
  CacheSwapper swapper(*online, engine_mutex, [&](std::vector<CachedList>&&) {
    applying = true;
    while (!release) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    applied = true;
  });
  online->seed(*train_);
  ASSERT_TRUE(eventually([&] { return applying.load(); }));
  // A call arrives mid-swap: it marks itself and waits on the mutex until the swap is done.
  std::atomic<bool> call_ran{false}, call_saw_whole_swap{false};
  std::thread call([&] {
    const ServingGaps::Call c(&gaps);
    std::lock_guard lock(engine_mutex);
    call_saw_whole_swap = applied.load();
    call_ran = true;
  });
  ASSERT_TRUE(eventually([&] { return gaps.in_call(); }));
  EXPECT_FALSE(call_ran) << "the call ran beside a swap";
  release = true;
  call.join();
  EXPECT_TRUE(call_ran);
  EXPECT_TRUE(call_saw_whole_swap);
  swapper.settle();
  EXPECT_EQ(swapper.stats()["swaps"].get<std::uint64_t>(), 1u);
}

TEST_F(CacheSwapperTest, EveryPlanOfAServedStreamGoesInBetweenCallsOnly) {
  auto online = policy();
  ServingGaps& gaps = *online->serving_gaps();
  std::mutex engine_mutex;
  Applies applies;
  CacheSwapper swapper(*online, engine_mutex, [&](std::vector<CachedList>&&) {
    if (gaps.in_call()) ++applies.during_call;
    ++applies.count;
  });
  online->seed(*train_);
  // Calls with short gaps, the policy re-planning from what they serve: the swapper applies its
  // plans in the gaps (or gives way to a call that marked itself) and never inside a call.
  std::atomic<bool> stop{false};
  std::thread serving([&] {
    std::size_t i = 0;
    while (!stop) {
      {
        const ServingGaps::Call c(&gaps);
        std::lock_guard lock(engine_mutex);
        std::this_thread::sleep_for(std::chrono::microseconds(500));
        const std::size_t at = (i += 8) % (train_->size() - 8);
        online->observe(std::span<const Query>(train_->data() + at, 8));
      }
      std::this_thread::sleep_for(std::chrono::microseconds(500));
    }
  });
  ASSERT_TRUE(eventually([&] { return applies.count >= 3; }));
  stop = true;
  serving.join();
  EXPECT_EQ(applies.during_call, 0);
  EXPECT_GE(swapper.stats()["swaps"].get<std::uint64_t>(), 3u);
}

TEST_F(CacheSwapperTest, StopsWhileWaitingForAGapThatNeverComes) {
  auto online = policy(/*planner_pauses=*/false);
  ServingGaps& gaps = *online->serving_gaps();
  std::mutex engine_mutex;
  std::atomic<int> count{0};
  auto swapper = std::make_unique<CacheSwapper>(*online, engine_mutex,
                                                [&](std::vector<CachedList>&&) { ++count; });
  gaps.call_begins();  // never ends
  online->seed(*train_);
  ASSERT_TRUE(eventually([&] { return gaps.waiting() == 1; }));
  swapper.reset();  // joins: a hang here fails by ctest's timeout
  EXPECT_EQ(count, 0);
  gaps.call_ends();
}

TEST(CacheSwapTiming, NamesRoundTripAndAnUnknownOneIsAClearError) {
  EXPECT_EQ(parse_cache_swap_timing("gaps"), CacheSwapTiming::kGaps);
  EXPECT_EQ(parse_cache_swap_timing("calls"), CacheSwapTiming::kCalls);
  EXPECT_STREQ(to_string(CacheSwapTiming::kCalls), "calls");
  try {
    parse_cache_swap_timing("later");
    FAIL() << "accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("--cache-swap"), std::string::npos) << e.what();
  }
}

}  // namespace
