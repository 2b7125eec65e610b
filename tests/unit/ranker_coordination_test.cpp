// The aggregator's cluster-wide ranker cache (aggregator/ranker_cache_coordinator.hpp) under
// scripted sequences of rankers: its plans (evictions, loads) and counts are exactly those worked
// out by hand below; applied to ISN caches (isn/ranker/ranker_cache.hpp) they keep every ISN's
// cache equal to the aggregator's view with no load or eviction the plan did not make; and the
// batcher's grouping by ranker (aggregator/batcher.hpp) cuts the batches planned by hand.
#include <gtest/gtest.h>

#include <memory>
#include <stdexcept>

#include "aggregator/batcher.hpp"
#include "aggregator/ranker_cache_coordinator.hpp"
#include "isn/ranker/ranker_cache.hpp"
#include "isn/ranker/reference_rankers.hpp"
#include "test_support.hpp"

using namespace gpusearch;
using namespace gpusearch::ranker;
using namespace gpusearch::testing;

namespace {

using Names = std::vector<std::string>;

// Five rankers r-000..r-004 of one shape: equal sizes, so budgets count whole rankers.
struct Store {
  TempDir dir;
  std::unique_ptr<RankerStore> store;
  std::uint64_t bytes = 0;
  Store() {
    write_ranker_mix(dir.path(), 5, RankerShape{"r", 8, 0, 0, 0, 4, {}}, "r", 3);
    store = std::make_unique<RankerStore>(RankerStore::open(dir.path()));
    bytes = store->index().rankers[0].bytes;
    for (const auto& e : store->index().rankers) EXPECT_EQ(e.bytes, bytes);
  }
};

std::string r(int i) { return "r-00" + std::to_string(i); }

struct Step {
  Names batch;    // the batch's rankers in ranking order
  Names waiting;  // rankers of queries left in the batcher
  Names evict, load;  // the plan worked out by hand
  Names view;     // the cache after the batch, most recently used first
};

// Budget: three rankers. LRU victims outside the batch, sparing rankers that waiting queries use.
const std::vector<Step> kScript = {
    {{r(0), r(1)}, {}, {}, {r(0), r(1)}, {r(1), r(0)}},
    {{r(2)}, {}, {}, {r(2)}, {r(2), r(1), r(0)}},
    // r-000 is least recently used but in the batch: r-001 goes.
    {{r(0), r(3)}, {}, {r(1)}, {r(3)}, {r(3), r(0), r(2)}},
    // r-002 is least recently used but waited for: r-000 goes.
    {{r(4)}, {r(2)}, {r(0)}, {r(4)}, {r(4), r(3), r(2)}},
    // Everything outside the batch is waited for: the least recently used goes all the same.
    {{r(1), r(2)}, {r(3), r(4)}, {r(3)}, {r(1)}, {r(2), r(1), r(4)}},
    // All resident: nothing to send.
    {{r(4), r(2), r(1)}, {}, {}, {}, {r(1), r(2), r(4)}},
};

}  // namespace

TEST(RankerCoordination, PlansExactlyAsWorkedOutByHand) {
  Store s;
  RankerCacheCoordinator c(s.store->index(), 3 * s.bytes);
  for (std::size_t i = 0; i < kScript.size(); ++i) {
    const Step& st = kScript[i];
    const RankerCachePlan p = c.plan(st.batch, [&](std::string_view n) {
      return std::find(st.waiting.begin(), st.waiting.end(), n) != st.waiting.end();
    });
    EXPECT_EQ(p.evict, st.evict) << "batch " << i;
    EXPECT_EQ(p.load, st.load) << "batch " << i;
    EXPECT_EQ(c.resident_names(), st.view) << "batch " << i;
  }
  const RankerCoordinatorStats& st = c.stats();
  EXPECT_EQ(st.batches, 6u);
  EXPECT_EQ(st.requests, 2u + 1 + 2 + 1 + 2 + 3);
  EXPECT_EQ(st.resident_hits, 1u + 1 + 3);  // r-000 (3rd), r-002 (5th), all three (6th)
  EXPECT_EQ(st.loads, 6u);
  EXPECT_EQ(st.evictions, 3u);
  EXPECT_EQ(st.evictions_of_waiting, 1u);
  EXPECT_EQ(st.load_bytes, 6 * s.bytes);
  EXPECT_EQ(st.plans_sent, 5u);
  EXPECT_EQ(c.used_bytes(), 3 * s.bytes);
}

TEST(RankerCoordination, IsnCachesFollowThePlanWithNothingUnplanned) {
  Store s;
  RankerCacheCoordinator c(s.store->index(), 3 * s.bytes);
  auto backend = make_cpu_ranker_backend();
  // Two ISNs under the same commands; each ranks a batch's rankers in order, two queries each.
  std::vector<std::unique_ptr<RankerCache>> isns;
  for (int i = 0; i < 2; ++i) {
    isns.push_back(std::make_unique<RankerCache>(*s.store, *backend, 3 * s.bytes));
    isns.back()->set_coordinated(true);
  }
  for (const Step& st : kScript) {
    const RankerCachePlan p = c.plan(st.batch, [&](std::string_view n) {
      return std::find(st.waiting.begin(), st.waiting.end(), n) != st.waiting.end();
    });
    for (auto& cache : isns) {
      for (const auto& e : p.evict) EXPECT_TRUE(cache->evict(e)) << e;
      for (const auto& l : p.load) cache->load(l);
      for (const auto& b : st.batch) cache->acquire(b, 2);
      EXPECT_EQ(cache->resident_names(), c.resident_names());
    }
  }
  for (auto& cache : isns) {
    const RankerCacheStats& st = cache->stats();
    EXPECT_EQ(st.unplanned_loads, 0u);
    EXPECT_EQ(st.unplanned_evictions, 0u);
    EXPECT_EQ(st.loads, 6u);
    EXPECT_EQ(st.evictions, 3u);
    EXPECT_EQ(st.requests, 2u * 11);
    EXPECT_EQ(st.misses, 6u);  // each load's first request
    EXPECT_EQ(st.hits, 22u - 6);
    EXPECT_EQ(st.load_bytes, 6 * s.bytes);
  }
}

TEST(RankerCoordination, UnknownAndOversizedRankersAreLeftToTheIsns) {
  Store s;
  RankerCacheCoordinator c(s.store->index(), s.bytes / 2);  // no ranker fits
  EXPECT_FALSE(c.plannable(r(0)));
  EXPECT_FALSE(c.plannable("no-such-ranker"));
  const RankerCachePlan p = c.plan(Names{r(0), "no-such-ranker"});
  EXPECT_TRUE(p.empty());
  EXPECT_EQ(c.stats().unplannable, 2u);
  RankerCacheCoordinator two(s.store->index(), 2 * s.bytes);
  EXPECT_THROW(two.plan(Names{r(0), r(1), r(2)}), std::logic_error);  // the batcher never cuts it
}

TEST(RankerCoordination, PolicyNames) {
  EXPECT_EQ(parse_ranker_cache_policy("coordinated"), RankerCachePolicy::kCoordinated);
  EXPECT_EQ(parse_ranker_cache_policy("per-isn-lru"), RankerCachePolicy::kPerIsnLru);
  EXPECT_THROW(parse_ranker_cache_policy("lru"), InputError);
}

TEST(RankerCoordination, BatcherGroupsByRankerWithinTheBudget) {
  Store s;
  RankerCacheCoordinator c(s.store->index(), 2 * s.bytes);  // two rankers at once
  c.plan(Names{r(2)});                                       // r-002 resident
  Batcher batcher(BatchPolicy{4, 1000000, false});
  batcher.group_by_ranker(&c);
  const Names rankers = {r(0), r(1), r(2), r(0), r(1), r(2), r(0), r(3), r(4)};
  for (std::size_t i = 0; i < rankers.size(); ++i) {
    PendingQuery q;
    q.id = "q" + std::to_string(i);
    q.sequence = i;
    q.ranker = rankers[i];
    batcher.add(std::move(q));
  }
  auto ids = [](const std::vector<PendingQuery>& b) {
    Names out;
    for (const auto& q : b) out.push_back(q.id);
    return out;
  };
  // The oldest (q0, r-000) and its ranker's queries; then r-002, resident, over r-001.
  EXPECT_EQ(ids(batcher.cut()), (Names{"q0", "q2", "q3", "q6"}));
  EXPECT_TRUE(batcher.waiting_for(r(1)));
  EXPECT_FALSE(batcher.waiting_for(r(0)));
  // Left: q1 r-001, q4 r-001, q5 r-002, q7 r-003, q8 r-004. The oldest's ranker, then r-002.
  EXPECT_EQ(ids(batcher.cut()), (Names{"q1", "q4", "q5"}));
  // r-003 and r-004 fit together.
  EXPECT_EQ(ids(batcher.cut()), (Names{"q7", "q8"}));
  EXPECT_TRUE(batcher.empty());
  EXPECT_FALSE(batcher.waiting_for(r(2)));
}
