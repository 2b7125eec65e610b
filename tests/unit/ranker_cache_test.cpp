// The ISN's ranker cache (isn/ranker/ranker_cache.hpp): LRU within a byte budget, with hits,
// misses, loads and evictions counted exactly under a scripted sequence; the aggregator's
// commanded loads make the first request the miss; a ranker that cannot load leaves the cache as
// it was.
#include <gtest/gtest.h>

#include "isn/ranker/ranker_cache.hpp"
#include "isn/ranker/reference_rankers.hpp"
#include "test_support.hpp"

using namespace gpusearch;
using namespace gpusearch::ranker;
using namespace gpusearch::testing;

namespace {

// Four rankers of one shape: equal sizes, so a budget holds a whole number of them.
struct Fixture {
  TempDir dir;
  std::unique_ptr<RankerStore> store;
  std::unique_ptr<RankerBackend> backend = make_cpu_ranker_backend();
  std::uint64_t bytes = 0;
  Fixture() {
    RankerShape shape{"c", 8, 0, 0, 0, 4, {}};
    write_ranker_mix(dir.path(), 4, shape, "c", 1);
    store = std::make_unique<RankerStore>(RankerStore::open(dir.path()));
    bytes = store->index().rankers[0].bytes;
    for (const auto& e : store->index().rankers) EXPECT_EQ(e.bytes, bytes);
  }
};

}  // namespace

TEST(RankerCache, LruWithinTheBudget) {
  Fixture f;
  RankerCache cache(*f.store, *f.backend, 2 * f.bytes);  // holds two
  cache.acquire("c-000");                                // miss, load
  cache.acquire("c-001");                                // miss, load
  cache.acquire("c-000", 3);                             // 3 hits
  cache.acquire("c-002");                                // miss: evicts c-001 (least recently used)
  EXPECT_FALSE(cache.resident("c-001"));
  EXPECT_TRUE(cache.resident("c-000"));
  cache.acquire("c-001");  // miss: evicts c-000
  EXPECT_EQ(cache.resident_names(), (std::vector<std::string>{"c-001", "c-002"}));
  const RankerCacheStats& s = cache.stats();
  EXPECT_EQ(s.requests, 7u);
  EXPECT_EQ(s.hits, 3u);
  EXPECT_EQ(s.misses, 4u);
  EXPECT_EQ(s.loads, 4u);
  EXPECT_EQ(s.evictions, 2u);
  EXPECT_EQ(s.load_bytes, 4 * f.bytes);
  EXPECT_EQ(cache.used_bytes(), 2 * f.bytes);
  EXPECT_EQ(s.unplanned_loads, 0u);
}

TEST(RankerCache, CommandedLoadsCountTheFirstRequestAsTheMiss) {
  Fixture f;
  RankerCache cache(*f.store, *f.backend, 2 * f.bytes);
  cache.set_coordinated(true);
  cache.load("c-000");
  cache.load("c-001");
  EXPECT_EQ(cache.stats().requests, 0u);
  cache.acquire("c-000", 4);          // 1 miss (the load was for it), 3 hits
  EXPECT_TRUE(cache.evict("c-001"));  // never used
  EXPECT_FALSE(cache.evict("c-001"));
  cache.load("c-002");
  cache.acquire("c-002");
  cache.acquire("c-003");  // not planned: loaded on request, LRU evicts c-000
  const RankerCacheStats& s = cache.stats();
  EXPECT_EQ(s.requests, 6u);
  EXPECT_EQ(s.hits, 3u);
  EXPECT_EQ(s.misses, 3u);
  EXPECT_EQ(s.loads, 4u);
  EXPECT_EQ(s.commanded_loads, 3u);
  EXPECT_EQ(s.commanded_evictions, 1u);
  EXPECT_EQ(s.evictions, 2u);
  EXPECT_EQ(s.unused_evictions, 1u);
  EXPECT_EQ(s.unplanned_loads, 1u);
  EXPECT_FALSE(cache.resident("c-000"));
}

TEST(RankerCache, FailedLoadsChangeNothing) {
  Fixture f;
  RankerCache cache(*f.store, *f.backend, f.bytes);
  cache.acquire("c-000");
  EXPECT_THROW(cache.acquire("no-such-ranker"), RankerError);
  EXPECT_TRUE(cache.resident("c-000"));
  EXPECT_EQ(cache.stats().requests, 1u);
  EXPECT_EQ(cache.stats().load_failures, 1u);
  RankerCache tiny(*f.store, *f.backend, f.bytes - 1);
  try {
    tiny.acquire("c-000");
    FAIL();
  } catch (const RankerError& e) {
    EXPECT_NE(std::string(e.what()).find("more than the ranker cache's"), std::string::npos)
        << e.what();
  }
  EXPECT_EQ(tiny.used_bytes(), 0u);
}
