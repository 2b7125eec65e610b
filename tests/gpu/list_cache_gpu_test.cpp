// The GPU engine through a list cache (paper 000; gpu/device_list_cache) against the reference:
// every policy, lambda in {0.1, 0.5, 1}, budgets down to one block and zero, shipping regions
// from none to room for everything (lists cached in part kept as prefixes or shipped whole), every
// mode, scoring and GPU algorithm, post-processing exercised and counted; a weakened finality bound
// gives wrong answers; the online policy changes the cache between calls and stays exact;
// `gpusearch search`'s engine with --gpu-mem below the shard's size, a plan file, and a stale plan
// refused. Skipped, loudly, without a CUDA device.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <iostream>
#include <map>
#include <cstdlib>
#include <set>
#include <random>
#include <thread>

#include <tbb/global_control.h>

#include "common/cache_admission.hpp"
#include "common/online_cache_policy.hpp"
#include "common/reference_engine.hpp"
#include "common/result_compare.hpp"
#include "gpu/device_list_cache.hpp"
#include "gpu/gpu_engine.hpp"
#include "gpu/post_processing.hpp"
#include "isn/cpu_engine/cpu_engine.hpp"
#include "isn/engine_factory.hpp"
#include "partition/cache_planner.hpp"
#include "partition/index_builder.hpp"
#include "partition/synthetic_collection.hpp"
#include "fragmenting_lists.hpp"
#include "test_support.hpp"

using namespace gpusearch;
using gpusearch::testing::known_queries;
using gpusearch::testing::TempDir;

namespace {

class GpuListCacheTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!gpu::gpu_available()) return;
    dir_ = new TempDir();
    BuildOptions o;
    o.out_dir = *dir_ / "idx";
    o.progress = false;
    build_index_synthetic(SyntheticParams::parse("docs=40000,seed=13,train_queries=600,"
                                                 "test_queries=300,mean_length=300"),
                          o);
    index_ = new Index(Index::open(*dir_ / "idx"));
    queries_ =
        new std::vector<Query>(known_queries(index_->shard(0), *dir_ / "idx" / "queries.test.tsv"));
  }
  static void TearDownTestSuite() {
    delete queries_;
    delete index_;
    delete dir_;
  }
  void SetUp() override {
    if (!gpu::gpu_available())
      GTEST_SKIP() << "NO CUDA DEVICE: GPU list-cache test skipped (run launch/gpu-host.sh cache "
                      "on a GPU host)";
  }
  static const ShardIndex& shard() { return index_->shard(0); }
  static std::uint64_t index_bytes() { return shard().postings().size_bytes(); }
  static std::vector<CachedList> plan(CachePolicy policy, std::uint64_t budget, double lambda) {
    CachePlanOptions o;
    o.policy = policy;
    o.budget_bytes = std::max<std::uint64_t>(budget, 1);
    o.lambda = lambda;
    o.progress = false;
    return make_cache_plan(*index_, *dir_ / "idx" / "queries.train.tsv", o).shards[0].lists;
  }
  static std::unique_ptr<gpu::GpuEngine> engine(std::uint64_t cache_bytes,
                                                std::uint64_t batch_bytes,
                                                gpu::GpuEngineOptions o = {}) {
    o.list_cache = true;
    o.cache_bytes = cache_bytes;
    o.batch_bytes = batch_bytes;
    o.postprocess_threads = 2;
    auto e = std::make_unique<gpu::GpuEngine>(shard(), 0, o);
    auto cpu = std::make_shared<const cpu::CpuEngine>(shard(), 0);
    e->set_post_processor(
        [cpu](const Query& q, const SearchParams& p, DocId from, const ShardResult& running) {
          return cpu->resume(q, p, from, running);
        });
    return e;
  }
  static TempDir* dir_;
  static Index* index_;
  static std::vector<Query>* queries_;
};
TempDir* GpuListCacheTest::dir_ = nullptr;
Index* GpuListCacheTest::index_ = nullptr;
std::vector<Query>* GpuListCacheTest::queries_ = nullptr;

struct References {
  std::map<std::pair<int, int>, std::vector<ReferenceAnswer>> by_setting;  // (mode, scoring)
};

const std::vector<ReferenceAnswer>& references(const Index& index, const std::vector<Query>& qs,
                                               const SearchParams& p, References& cache) {
  auto& refs = cache.by_setting[{int(p.mode), int(p.scoring) * 100000 + int(p.k)}];
  if (refs.empty())
    for (const Query& q : qs) refs.push_back(reference_answer(index, q, p, 2 * p.k + 20));
  return refs;
}

// Runs the queries through `e` (in calls of `call_size`) and counts wrong answers; with
// `expect`, each is a test failure.
std::size_t wrong_answers(gpu::GpuEngine& e, const Index& index, const std::vector<Query>& qs,
                          const SearchParams& p, References& refs_cache, const std::string& what,
                          bool expect = true, std::size_t call_size = 1u << 30) {
  const auto& refs = references(index, qs, p, refs_cache);
  std::vector<ShardResult> out(qs.size());
  for (std::size_t b = 0; b < qs.size(); b += call_size) {
    const std::size_t n = std::min(call_size, qs.size() - b);
    e.search(std::span<const Query>(qs.data() + b, n), p,
             std::span<ShardResult>(out.data() + b, n));
  }
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < qs.size(); ++i) {
    const ShardResult* r = &out[i];
    const QueryResult merged = merge_shard_results(p, std::span<const ShardResult* const>(&r, 1));
    const auto diff = compare_top_k(refs[i].hits, refs[i].total_matches, p.k, merged.hits);
    if (diff) ++wrong;
    if (expect) {
      EXPECT_FALSE(diff.has_value())
          << what << " " << to_string(p.mode) << " " << to_string(p.scoring) << " k " << p.k
          << " query " << qs[i].id << ": " << diff.value_or("");
    }
  }
  return wrong;
}

TEST_F(GpuListCacheTest, ExactForEveryPolicyLambdaBudgetModeAndScoring) {
  std::uint64_t one_block = ~0ull;
  for (TermId t = 0; t < shard().num_terms(); ++t)
    if (shard().term(t).num_blocks > 0)
      one_block = std::min(one_block, blocks_bytes(shard(), shard().term(t).first_block, 1));
  struct PlanCase {
    CachePolicy policy;
    double lambda;
  };
  const std::vector<PlanCase> plans = {{CachePolicy::kVfb, 0.1},
                                       {CachePolicy::kVfb, 0.5},
                                       {CachePolicy::kVfb, 1.0},
                                       {CachePolicy::kQtf, 1.0},
                                       {CachePolicy::kQtfDf, 1.0}};
  // Budgets: none, one block, a tenth of the postings (the shard at 10x the cache), two fifths
  // (2.5x). Shipping: none, a small region (long lists cut), room for everything.
  const std::vector<std::uint64_t> budgets = {0, one_block, index_bytes() / 10,
                                              index_bytes() * 2 / 5};
  const std::vector<std::uint64_t> ships = {0, index_bytes() / 50, 2 * index_bytes() + (1 << 20)};
  std::vector<Query> qs(queries_->begin(),
                        queries_->begin() + std::min<std::size_t>(150, queries_->size()));
  References refs;
  std::map<std::string, std::uint64_t> post_processed;
  for (const PlanCase& pc : plans) {
    for (std::uint64_t budget : budgets) {
      const auto lists =
          budget > 0 ? plan(pc.policy, budget, pc.lambda) : std::vector<CachedList>{};
      for (std::uint64_t ship : ships)
        for (bool tails : {false, true}) {
          if (tails && ship == 0) continue;
          gpu::GpuEngineOptions o;
          o.ship_tails = tails;
          auto e = engine(budget, ship, o);
          e->apply_cache_plan(lists);
          const std::string what = std::string(to_string(pc.policy)) + " lambda " +
                                   std::to_string(pc.lambda) + " cache " + std::to_string(budget) +
                                   " ship " + std::to_string(ship) + (tails ? " tails" : "");
          for (Mode mode : {Mode::kAnd, Mode::kOr, Mode::kAndOr}) {
            for (Scoring scoring : {Scoring::kBm25, Scoring::kBm25Pr}) {
              e->clear_stats();
              wrong_answers(*e, *index_, qs, {mode, scoring, 0.3, 10}, refs, what);
              post_processed[std::string(to_string(mode)) + " " +
                             std::string(to_string(scoring))] +=
                  e->list_cache_counters().post_processed;
            }
          }
        }
    }
  }
  for (const auto& [setting, count] : post_processed)
    EXPECT_GT(count, 100u) << setting << ": post-processing was not exercised";
}

TEST_F(GpuListCacheTest, ExactForEveryAlgorithmDecompositionAndK) {
  const auto lists = plan(CachePolicy::kVfb, index_bytes() / 10, 0.5);
  References refs;
  for (const std::string algorithm : {"bmw", "window", "exhaustive"}) {
    for (unsigned max_segments : {1u, 64u}) {
      gpu::GpuEngineOptions o;
      o.algorithm = algorithm;
      o.max_segments_per_query = max_segments;
      o.min_segment_postings = max_segments > 1 ? 64 : 8192;
      o.batch_size = 64;
      auto e = engine(index_bytes() / 10, index_bytes() / 20, o);
      e->apply_cache_plan(lists);
      for (unsigned k : {1u, 100u})
        for (Mode mode : {Mode::kAnd, Mode::kOr, Mode::kAndOr})
          wrong_answers(*e, *index_, *queries_, {mode, Scoring::kBm25, 0.3, k}, refs,
                        algorithm + " segments " + std::to_string(max_segments));
      EXPECT_GT(e->list_cache_counters().post_processed, 0u);
      EXPECT_GT(e->list_cache_counters().batches, 3u) << "batches cut by the shipping region";
    }
  }
  // Without a post-processor the reference completes the truncated queries.
  gpu::GpuEngineOptions o;
  o.list_cache = true;
  o.cache_bytes = index_bytes() / 10;
  o.batch_bytes = index_bytes() / 20;
  gpu::GpuEngine bare(shard(), 0, o);
  bare.apply_cache_plan(lists);
  wrong_answers(bare, *index_, *queries_, {Mode::kAnd, Scoring::kBm25, 0.3, 10}, refs,
                "no post-processor");
}

TEST_F(GpuListCacheTest, WeakenedFinalityBoundGivesWrongAnswers) {
  gpu::GpuEngineOptions o;
  o.finality_bound_scale = 0.5;
  auto e = engine(index_bytes() / 10, index_bytes() / 50, o);
  e->apply_cache_plan(plan(CachePolicy::kVfb, index_bytes() / 10, 0.5));
  References refs;
  std::size_t wrong = 0;
  for (Mode mode : {Mode::kAnd, Mode::kOr})
    wrong +=
        wrong_answers(*e, *index_, *queries_, {mode, Scoring::kBm25, 0.3, 10}, refs, "weak", false);
  EXPECT_GT(wrong, 0u) << "halving the bound past the horizon should lose documents";
}

// The drifting test log of a generator spec like the fixture's, resolved on its shard (the
// online policy's tests).
std::vector<Query> drifting_queries(const ShardIndex& shard) {
  auto params = SyntheticParams::parse(
      "docs=40000,seed=13,train_queries=600,test_queries=600,"
      "mean_length=300,query_drift=1");
  std::vector<Query> drifting;
  for (const auto& [id, text] : SyntheticCollection(params).queries(false)) {
    Query q;
    QueryProblem p;
    if (resolve_query(shard, QueryText{id, text, 0, {}}, QueryLimits{}, q, p, "drift") &&
        !q.terms.empty())
      drifting.push_back(std::move(q));
  }
  return drifting;
}

// Both places a plan can go in: between calls on the engine's swapper thread (the default), and
// at the start of the next call; and a whole-list policy (qtf: frequencies, no replay) between
// calls. Every answer stays the reference's either way.
TEST_F(GpuListCacheTest, OnlinePolicyChangesTheCacheBetweenCallsAndStaysExact) {
  const std::vector<Query> drifting = drifting_queries(shard());
  const std::uint64_t budget = index_bytes() / 10;
  for (const auto& [policy, swap] : {std::pair{CachePolicy::kVfb, CacheSwapTiming::kGaps},
                                     std::pair{CachePolicy::kVfb, CacheSwapTiming::kCalls},
                                     std::pair{CachePolicy::kQtf, CacheSwapTiming::kGaps}}) {
    SCOPED_TRACE(std::string(to_string(policy)) + ", swaps " + std::string(to_string(swap)));
    const double lambda = policy == CachePolicy::kVfb ? 0.5 : 1.0;
    auto e = engine(budget, index_bytes() / 20);
    e->apply_cache_plan(plan(policy, budget, lambda));
    OnlinePolicyOptions oo;
    oo.policy = policy;
    oo.lambda = lambda;
    oo.budget_bytes = budget;
    oo.half_life_queries = 100;
    oo.replan_queries = 50;
    oo.min_payoff = 0;  // every plan goes in: the swaps between calls are what this test checks
    auto online = std::make_shared<OnlineCachePolicy>(shard(), oo);
    e->set_online_policy(online, budget / 4, swap);
    References refs;
    std::uint64_t calls = 0;
    for (Mode mode : {Mode::kAnd, Mode::kOr, Mode::kAndOr}) {
      e->clear_stats();
      // Calls of 64 queries, as an ISN's batches; the policy's plans go in between them.
      const std::size_t n = std::min<std::size_t>(drifting.size(), 400);
      std::vector<Query> qs(drifting.begin(), drifting.begin() + std::ptrdiff_t(n));
      for (std::size_t b = 0; b < qs.size(); b += 64) {
        const std::size_t m = std::min<std::size_t>(64, qs.size() - b);
        std::vector<Query> call(qs.begin() + std::ptrdiff_t(b),
                                qs.begin() + std::ptrdiff_t(b + m));
        wrong_answers(*e, *index_, call, {mode, Scoring::kBm25, 0.3, 10}, refs, "online");
        ++calls;
        refs.by_setting.clear();
        online->drain();  // this call's plan is made ...
        // ... and, between calls, applied by the swapper before the next call (gaps), or by
        // the next call itself (calls). Without the settle the next call may come first: also
        // exact, but the count below would depend on this host's speed.
        e->settle_cache_swaps();
      }
    }
    const nlohmann::json stats = e->stats();
    ASSERT_TRUE(stats.contains("list_cache"));
    const auto& lc = stats["list_cache"];
    // VFB's prefixes move with every plan; whole lists only where the frequency order changes.
    EXPECT_GT(lc["online_changes"].size(), policy == CachePolicy::kVfb ? 5u : 0u);
    for (const auto& c : lc["online_changes"])
      EXPECT_EQ(c["in_gap"].get<bool>(), swap == CacheSwapTiming::kGaps) << c.dump();
    const auto& sw = lc["online_swaps"];
    EXPECT_EQ(sw["swap"], to_string(swap)) << sw.dump();
    if (swap == CacheSwapTiming::kGaps) {
      EXPECT_EQ(sw["swaps"].get<std::size_t>(), lc["online_changes"].size()) << sw.dump();
    }
    const auto& ps = lc["online_policy"];
    EXPECT_GT(ps["plans"].get<std::uint64_t>(), 5u);
    // The engine marks every call: the planner (pausing by default) runs only between them.
    EXPECT_TRUE(ps["pause_while_serving"].get<bool>());
    EXPECT_EQ(ps["serving_calls"].get<std::uint64_t>(), calls) << ps.dump();
    EXPECT_FALSE(online->serving_gaps()->in_call());
  }
}

// A change that compacts the region (fragmentation) moves the lists it keeps within the device
// pool (through lane 0's region, or, where the lanes are too small to stage through, again from
// the host) and copies only the list it lacked: every answer over the moved lists stays exact,
// through the exhaustive decode and the default algorithm.
TEST_F(GpuListCacheTest, ARebuildMovesTheKeptListsOnTheDeviceAndStaysExact) {
  // A big list and 20 of a third to a half of its words (as the unit test
  // ListCacheDirectoryTest.ARebuildMovesTheListsItKeepsAndCopiesOnlyTheNewOnes).
  const gpusearch::testing::FragmentingLists f = gpusearch::testing::fragmenting_lists(shard());
  const TermId big = f.big;
  const std::uint64_t big_words = f.big_words;
  const std::vector<TermId>& mid = f.mid;
  ASSERT_EQ(mid.size(), 20u);
  // Plan A caches the mid lists in part (all but their last block, where they have two), so
  // that batches with ship_tails ship them whole over their cached prefixes and restore the
  // lanes' tables afterwards: the relocated prefixes' entries are then shifted from restored
  // ones.
  std::vector<CachedList> plan_a, plan_b = {{big, shard().term(big).num_blocks, 0}};
  std::uint64_t a_bytes = 0;
  for (std::size_t i = 0; i < mid.size(); ++i) {
    const std::uint32_t nb = shard().term(mid[i]).num_blocks;
    const std::uint32_t blocks = nb >= 2 ? nb - 1 : nb;
    plan_a.push_back({mid[i], blocks, 0});
    if (i % 2 == 0) plan_b.push_back(plan_a.back());
    const TermInfo& ti = shard().term(mid[i]);
    a_bytes += 4 * (shard().block_offsets()[ti.first_block + blocks] -
                    shard().block_offsets()[ti.first_block]);
  }
  // Queries over the moved lists: each alone, and pairs with the big one and with each other.
  std::vector<Query> qs;
  for (std::size_t i = 0; i < mid.size(); ++i) {
    qs.push_back({"m" + std::to_string(i), {mid[i]}, 0, ""});
    qs.push_back({"b" + std::to_string(i), {mid[i], big}, 0, ""});
    qs.push_back({"p" + std::to_string(i), {mid[i], mid[(i + 2) % mid.size()]}, 0, ""});
  }
  // Lanes that stage the moves (4 MB each), and none (the fallback from the host); lists cached
  // in part used as prefixes, or shipped whole (ship_tails).
  for (std::uint64_t ship : {std::uint64_t(8) << 20, std::uint64_t(0)})
  for (bool tails : {false, true}) {
    if (tails && ship == 0) continue;
    for (const std::string algorithm : {"exhaustive", "bmw"}) {
      SCOPED_TRACE("ship " + std::to_string(ship) + (tails ? " tails, " : ", ") + algorithm);
      gpu::GpuEngineOptions o;
      o.algorithm = algorithm;
      o.ship_tails = tails;
      auto e = engine(a_bytes, ship, o);
      ASSERT_EQ(e->apply_cache_plan(plan_a).lists_added, 20u);
      References refs;
      for (Mode mode : {Mode::kOr, Mode::kAnd})
        wrong_answers(*e, *index_, qs, {mode, Scoring::kBm25, 0.3, 10}, refs, "before a rebuild");
      const CacheChange b = e->apply_cache_plan(plan_b);
      ASSERT_TRUE(b.rebuilt);
      EXPECT_EQ(b.words_copied, big_words);
      EXPECT_GT(b.words_relocated, 0u);
      EXPECT_EQ(b.shifts.size(), b.lists_relocated);
      for (Mode mode : {Mode::kOr, Mode::kAnd})
        wrong_answers(*e, *index_, qs, {mode, Scoring::kBm25, 0.3, 10}, refs, "after a rebuild");
      const nlohmann::json st = e->stats();
      EXPECT_EQ(st["list_cache"]["device"]["cache_bytes_relocated"].get<std::uint64_t>(),
                b.words_relocated * 4)
          << st["list_cache"]["device"].dump();
    }
  }
}

// Plan after plan at a budget where first fit fragments: compactions among the changes, calls
// between them that ship lists into both lanes, and every lane table checked against the
// directory before and after each change (GPUSEARCH_CHECK_CACHE_TABLES). Session 37's first
// table shifts were uploaded by a pageable cudaMemcpy that a kernel on a non-blocking stream
// could outrun: a later change re-applied an earlier one's shifts, and the drift benchmark hit
// an illegal address.
TEST_F(GpuListCacheTest, ChangesAndCompactionsKeepEveryLaneTableRight) {
  ::setenv("GPUSEARCH_CHECK_CACHE_TABLES", "1", 1);
  auto e = engine(index_bytes() / 40, index_bytes() / 20);
  ::unsetenv("GPUSEARCH_CHECK_CACHE_TABLES");
  std::vector<TermId> candidates;
  for (TermId t = 0; t < shard().num_terms(); ++t)
    if (shard().term(t).num_blocks >= 2) candidates.push_back(t);
  std::mt19937_64 rng(17);
  std::vector<Query> qs(queries_->begin(),
                        queries_->begin() + std::min<std::size_t>(60, queries_->size()));
  References refs;
  std::uint64_t compactions = 0, shifts = 0;
  for (int round = 0; round < 30; ++round) {
    std::vector<CachedList> target;
    std::set<TermId> seen;
    for (int i = 0; i < 150; ++i) {
      const TermId t = candidates[rng() % candidates.size()];
      if (!seen.insert(t).second) continue;
      target.push_back({t, 1 + std::uint32_t(rng() % shard().term(t).num_blocks), 0});
    }
    // Throws on a table that disagrees with the directory, before or after the change.
    const CacheChange c = e->apply_cache_plan(target, round % 2 ? ~0ull : index_bytes() / 400);
    compactions += c.rebuilt;
    shifts += c.shifts.size();
    wrong_answers(*e, *index_, qs, {Mode::kAndOr, Scoring::kBm25, 0.3, 10}, refs,
                  "round " + std::to_string(round), true, 16);
  }
  EXPECT_GE(compactions, 1u);  // this index and plan sequence: 1 on the H200 (deterministic)
  EXPECT_GT(shifts, 0u);
}

// The swapper applies plans while calls keep coming, with no settle between them: a call that
// arrives during a swap waits for it, none sees a change in progress, every answer is exact.
TEST_F(GpuListCacheTest, OnlinePlansSwappedInWhileCallsKeepComingStayExact) {
  const std::vector<Query> drifting = drifting_queries(shard());
  const std::uint64_t budget = index_bytes() / 10;
  auto e = engine(budget, index_bytes() / 20);
  e->apply_cache_plan(plan(CachePolicy::kVfb, budget, 0.5));
  OnlinePolicyOptions oo;
  oo.lambda = 0.5;
  oo.budget_bytes = budget;
  oo.half_life_queries = 50;
  oo.replan_queries = 16;
  oo.min_payoff = 0;
  oo.planner_priority = PlannerPriority::kNormal;
  auto online = std::make_shared<OnlineCachePolicy>(shard(), oo);
  e->set_online_policy(online, budget / 8);
  References refs;
  for (int round = 0; round < 6; ++round)
    for (std::size_t b = 0; b + 32 <= drifting.size(); b += 32) {
      std::vector<Query> call(drifting.begin() + std::ptrdiff_t(b),
                              drifting.begin() + std::ptrdiff_t(b + 32));
      const Mode mode = round % 2 ? Mode::kOr : Mode::kAndOr;
      wrong_answers(*e, *index_, call, {mode, Scoring::kBm25, 0.3, 10}, refs, "online, no settle");
      refs.by_setting.clear();
      std::this_thread::sleep_for(std::chrono::microseconds(200 * (b % 5)));
    }
  e->settle_cache_swaps();
  const nlohmann::json stats = e->stats();
  const auto& sw = stats["list_cache"]["online_swaps"];
  EXPECT_GE(sw["swaps"].get<std::uint64_t>(), 3u) << sw.dump();
  std::cout << "swaps while calls kept coming: " << sw.dump() << "\n";
}

// The engine tells the policy what its cache holds (set_online_policy, and after each change),
// and the gate compares plans with that: served the training log the cache was planned from,
// the online policy's plans save nothing and none goes in; without the gate each goes in.
TEST_F(GpuListCacheTest, OnlinePolicyLeavesTheCacheAloneOnTheMixItWasPlannedFor) {
  std::vector<Query> train;
  for (const QueryText& qt : read_query_file(*dir_ / "idx" / "queries.train.tsv").queries) {
    Query q;
    QueryProblem p;
    if (resolve_query(shard(), qt, QueryLimits{}, q, p, "train") && !q.terms.empty())
      train.push_back(std::move(q));
  }
  ASSERT_GT(train.size(), 300u);
  const std::uint64_t budget = index_bytes() / 10;
  const auto lists =
      plan_shard_cache(shard(), train, {CachePolicy::kVfb, 0.5, budget}, 10, Scoring::kBm25);
  for (double min_payoff : {1.0, 0.0}) {
    auto e = engine(budget, index_bytes() / 20);
    e->apply_cache_plan(lists);
    OnlinePolicyOptions oo;
    oo.lambda = 0.5;
    oo.budget_bytes = budget;
    oo.half_life_queries = 4000;
    oo.replan_queries = 100;
    oo.max_pending = train.size();
    oo.min_payoff = min_payoff;
    auto online = std::make_shared<OnlineCachePolicy>(shard(), oo);
    online->seed(train);  // the stream's past: the log the cache was planned from
    online->take_plan();  // that plan's equal: the cache holds it
    e->set_online_policy(online, budget / 4);
    References refs;
    for (std::size_t b = 0; b < train.size(); b += 100) {
      std::vector<Query> call(train.begin() + std::ptrdiff_t(b),
                              train.begin() + std::ptrdiff_t(std::min(b + 100, train.size())));
      wrong_answers(*e, *index_, call, {Mode::kAnd, Scoring::kBm25, 0.3, 10}, refs, "online gate");
      refs.by_setting.clear();
      online->drain();
    }
    const nlohmann::json stats = e->stats();
    ASSERT_TRUE(stats.contains("list_cache"));
    const auto& ps = stats["list_cache"]["online_policy"];
    if (min_payoff > 0) {
      EXPECT_EQ(stats["list_cache"]["online_changes"].size(), 0u) << ps.dump();
      EXPECT_GE(ps["plans_withheld"].get<std::uint64_t>(), 2u) << ps.dump();
      EXPECT_EQ(ps["planner_priority"], "idle");
    } else {
      EXPECT_GE(stats["list_cache"]["online_changes"].size(), 2u) << ps.dump();
      EXPECT_EQ(ps["plans_withheld"].get<std::uint64_t>(), 0u);
    }
  }
}

TEST_F(GpuListCacheTest, FactoryServesAShardLargerThanTheBudgetAndRefusesAStalePlan) {
  // A plan file, and the engine built from flags as `gpusearch search` and the ISN build it.
  CachePlanOptions po;
  po.budget_bytes = index_bytes() / 10;
  po.lambda = 0.5;
  po.progress = false;
  const auto plan_file = *dir_ / "plan.json";
  make_cache_plan(*index_, *dir_ / "idx" / "queries.train.tsv", po).write(plan_file);
  EngineOptions eo;
  eo.engine = "gpu";
  eo.list_cache.cache_bytes = std::to_string(index_bytes() / 10);
  eo.list_cache.batch_bytes = std::to_string(index_bytes() / 10);
  eo.list_cache.plan = plan_file;
  eo.list_cache.index_dir = *dir_ / "idx";
  auto e = make_engine(eo, shard(), 0);
  auto* g = dynamic_cast<gpu::GpuEngine*>(e.get());
  ASSERT_NE(g, nullptr);
  ASSERT_TRUE(g->has_list_cache());
  const nlohmann::json stats = g->stats();
  // The device holds a fifth of the posting words at a time (cache + shipping regions); the
  // resident block metadata comes beside it.
  const auto& setup = stats["list_cache_setup"];
  EXPECT_LT(setup["cache_bytes"].get<std::uint64_t>() + setup["batch_bytes"].get<std::uint64_t>(),
            index_bytes() / 4);
  References refs;
  wrong_answers(*g, *index_, *queries_, {Mode::kAndOr, Scoring::kBm25Pr, 0.3, 10}, refs, "factory");
  // --cache-train plans here; a plan bigger than the cache, or for another index, is refused.
  eo.list_cache.plan.clear();
  eo.list_cache.train = *dir_ / "idx" / "queries.train.tsv";
  EXPECT_NO_THROW(make_engine(eo, shard(), 0));
  eo.list_cache.train.clear();
  eo.list_cache.plan = plan_file;
  eo.list_cache.cache_bytes = std::to_string(index_bytes() / 100);
  EXPECT_THROW(make_engine(eo, shard(), 0), InputError);
  eo.list_cache.cache_bytes = std::to_string(index_bytes() / 10);
  TempDir other;
  BuildOptions bo;
  bo.out_dir = other / "idx";
  bo.progress = false;
  build_index_synthetic(SyntheticParams::parse("docs=2000,seed=1,test_queries=5"), bo);
  eo.list_cache.index_dir = other / "idx";
  EXPECT_THROW(make_engine(eo, shard(), 0), InputError);
}

// Host code (runs without a device): the post-processing threads run every task, also where
// the process allows no worker thread (an ISN with --threads 1), and pass a task's exception on.
TEST(PostProcessingThreads, RunEveryTaskWithoutWorkersAndRethrow) {
  for (std::size_t parallelism : {std::size_t(1), std::size_t(4)}) {
    tbb::global_control limit(tbb::global_control::max_allowed_parallelism, parallelism);
    gpu::PostProcessingThreads post(3);
    std::atomic<int> done{0};
    for (int i = 0; i < 100; ++i) post.submit([&done] { ++done; });
    post.wait();
    EXPECT_EQ(done.load(), 100) << "parallelism " << parallelism;
    EXPECT_EQ(post.tasks(), 100u);
    post.submit([] { throw InputError("task", 0, "failed"); });
    post.submit([&done] { ++done; });
    EXPECT_THROW(post.wait(), InputError);
    EXPECT_NO_THROW(post.wait());
  }
}

}  // namespace
