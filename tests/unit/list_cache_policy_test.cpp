// The list cache's sizing (isn/list_cache_setup: --gpu-mem, --cache-fraction, sizes, the
// throughput model), the throughput model of paper 000, eqs. 6-7 (common/cache_model), and the
// online policy (common/online_cache_policy) following a query stream whose topic mix changes.
#include <gtest/gtest.h>

#include <map>
#include <sstream>

#include "common/cache_admission.hpp"
#include "common/cache_model.hpp"
#include "common/online_cache_policy.hpp"
#include "common/shard_index.hpp"
#include "isn/list_cache_setup.hpp"
#include "partition/index_builder.hpp"
#include "partition/synthetic_collection.hpp"
#include "test_support.hpp"

using namespace gpusearch;
using gpusearch::testing::TempDir;

namespace {

TEST(ListCacheSizing, FractionSizesAndBadBudgets) {
  ListCacheEngineOptions o;
  o.gpu_mem = "1000";
  o.cache_fraction = 0.75;
  ListCacheSizes s = size_list_cache(o, 0, 200, 4096);
  EXPECT_EQ(s.memory_bytes, 1000u);
  EXPECT_EQ(s.cache_bytes, 600u);
  EXPECT_EQ(s.batch_bytes, 200u);
  EXPECT_EQ(s.batch_queries, 4096u);
  EXPECT_EQ(s.chosen_by, "fraction");
  // A fraction of the device, shared by two engines.
  o.gpu_mem = "0.5";
  o.engines_on_device = 2;
  s = size_list_cache(o, 8000, 200, 64);
  EXPECT_EQ(s.memory_bytes, 2000u);
  EXPECT_EQ(s.cache_bytes + s.batch_bytes, 1800u);
  o.gpu_mem = "4000";  // bytes are the GPU's too
  EXPECT_EQ(size_list_cache(o, 8000, 200, 64).memory_bytes, 2000u);
  // Sizes: with no budget they make it; over a budget they are refused.
  o = {};
  o.cache_bytes = "0";
  o.batch_bytes = "1M";
  s = size_list_cache(o, 0, 100, 64);
  EXPECT_EQ(s.cache_bytes, 0u);
  EXPECT_EQ(s.batch_bytes, 1u << 20);
  EXPECT_EQ(s.memory_bytes, 100u + (1u << 20));
  o.gpu_mem = "1M";
  EXPECT_THROW(size_list_cache(o, 0, 100, 64), InputError);
  o.batch_bytes.clear();  // the rest of the budget
  o.cache_bytes = "1K";
  s = size_list_cache(o, 0, 100, 64);
  EXPECT_EQ(s.batch_bytes, (1u << 20) - 1024u - 100u);
  // A budget below the resident arrays; a bad fraction; a bound without a model.
  o = {};
  o.gpu_mem = "100";
  EXPECT_THROW(size_list_cache(o, 0, 200, 64), InputError);
  o.gpu_mem = "1G";
  o.cache_fraction = 1.5;
  EXPECT_THROW(size_list_cache(o, 0, 200, 64), InputError);
  o.cache_fraction = 0.5;
  o.max_response_ms = 10;
  EXPECT_THROW(size_list_cache(o, 0, 200, 64), InputError);
  o.max_response_ms = 0;
  o.gpu_mem = "lots";
  EXPECT_THROW(size_list_cache(o, 0, 200, 64), InputError);
}

// Runs as the model says they behave: c(n) = c0 + c1 / n, a copy of b bytes takes a + t b, and
// dq falls linearly with the cache.
std::vector<CacheRunSample> synthetic_runs(double c0, double c1, double a, double t,
                                           double memory) {
  std::vector<CacheRunSample> runs;
  for (double share : {0.1, 0.3, 0.5, 0.7, 0.9}) {
    for (double max_n : {256.0, 4096.0}) {
      CacheRunSample s;
      s.cache_bytes = share * memory;
      s.batch_bytes = memory - s.cache_bytes;
      const double dq = 1e6 * (1.0 - share);
      const double n = std::min(max_n, std::max(1.0, s.batch_bytes / 2 / dq));
      s.queries = 100000;
      s.batches = s.queries / n;
      s.shipped_bytes = dq * s.queries;
      const double copy = a + t * (s.shipped_bytes / s.batches);
      s.transfer_seconds = copy * s.batches;
      // wall = N (c(n) + t(S_b) dq) with t(S_b) = t + a / (S_b / 2), as the model reads it.
      s.wall_seconds = s.queries * (c0 + c1 / n + (t + a / (s.batch_bytes / 2)) * dq);
      s.max_batch_queries = max_n;
      runs.push_back(s);
    }
  }
  return runs;
}

TEST(ThroughputModel, FitRecoversTheParametersAndChoosesWithinTheBound) {
  const double memory = 8e9;
  const auto runs = synthetic_runs(2e-6, 3e-3, 1e-5, 1.0 / 20e9, memory);
  const ThroughputModel m = ThroughputModel::fit(runs);
  EXPECT_NEAR(m.c0, 2e-6, 1e-9);
  EXPECT_NEAR(m.c1, 3e-3, 1e-6);
  EXPECT_NEAR(m.t_per_byte, 1.0 / 20e9, 1e-13);
  EXPECT_NEAR(m.t_fixed_s, 1e-5, 1e-8);
  EXPECT_NEAR(m.dq(0.5 * memory), 0.5e6, 1.0);
  EXPECT_NEAR(m.dq(0.6 * memory), 0.4e6, 1.0);  // interpolated
  // The choice is the grid's best, and a response bound is met (and costs throughput).
  const CacheSplit free_choice = m.choose(memory, 1e6, 4096, 0);
  ASSERT_TRUE(free_choice.feasible);
  for (unsigned i = 0; i <= 200; ++i) {
    const double c = (memory - 1e6) * i / 200;
    EXPECT_LE(m.at(c, memory - c, 4096, 0).throughput, free_choice.throughput * (1 + 1e-12));
  }
  const CacheSplit bounded = m.choose(memory, 1e6, 4096, 5.0);
  ASSERT_TRUE(bounded.feasible);
  EXPECT_LE(bounded.response_ms, 5.0 + 1e-9);
  EXPECT_LE(bounded.throughput, free_choice.throughput);
  EXPECT_FALSE(m.choose(memory, 1e6, 4096, 1e-6).feasible);  // below c1: nothing meets it
  // The JSON round trip keeps the model.
  const ThroughputModel back = ThroughputModel::from_json(m.to_json());
  EXPECT_DOUBLE_EQ(back.at(3e9, 5e9, 4096, 0).throughput, m.at(3e9, 5e9, 4096, 0).throughput);
}

TEST(ThroughputModel, SizingTakesTheModelsChoice) {
  TempDir tmp;
  const ThroughputModel m = ThroughputModel::fit(synthetic_runs(2e-6, 3e-3, 1e-5, 5e-11, 8e9));
  m.write(tmp / "model.json");
  ListCacheEngineOptions o;
  o.gpu_mem = "8000000000";
  o.model = tmp / "model.json";
  o.max_response_ms = 5;
  const ListCacheSizes s = size_list_cache(o, 0, 0, 4096);
  EXPECT_EQ(s.chosen_by, "model");
  const CacheSplit want = m.choose(8e9, std::max(double(1 << 20), 8e7), 4096, 5);
  EXPECT_NEAR(double(s.cache_bytes), want.cache_bytes, 1.0);
  EXPECT_EQ(s.batch_queries, unsigned(want.batch_queries));
  EXPECT_LE(s.model_choice.at("predicted_batch_ms").get<double>(), 5.0 + 1e-9);
  o.model = tmp / "missing.json";
  EXPECT_THROW(size_list_cache(o, 0, 0, 4096), InputError);
}

// The online policy, fed one query mix and then another, ends near the offline plan of the
// second mix and away from the first's.
TEST(OnlineCachePolicy, FollowsAChangeInTheQueryMix) {
  TempDir tmp;
  BuildOptions bo;
  bo.out_dir = tmp / "idx";
  bo.progress = false;
  build_index_synthetic(SyntheticParams::parse("docs=20000,seed=9,train_queries=600,"
                                               "test_queries=10,mean_length=250"),
                        bo);
  const Index index = Index::open(tmp / "idx");
  const ShardIndex& shard = index.shard(0);
  std::vector<Query> all;
  for (const QueryText& qt : read_query_file(tmp / "idx" / "queries.train.tsv").queries) {
    Query q;
    QueryProblem p;
    if (resolve_query(shard, qt, {}, q, p, "train") && !q.terms.empty()) all.push_back(q);
  }
  // Two mixes: queries whose rarest term has an even id, and the others.
  std::vector<Query> mix_a, mix_b;
  for (const Query& q : all) {
    TermId rare = q.terms[0];
    for (TermId t : q.terms)
      if (shard.term(t).df_shard < shard.term(rare).df_shard) rare = t;
    (rare % 2 == 0 ? mix_a : mix_b).push_back(q);
  }
  ASSERT_GT(mix_a.size(), 100u);
  ASSERT_GT(mix_b.size(), 100u);
  const std::uint64_t budget = shard.postings().size_bytes() / 20;
  const AdmissionOptions admission{CachePolicy::kVfb, 0.5, budget};
  const auto plan_a = plan_shard_cache(shard, mix_a, admission, 10, Scoring::kBm25);
  const auto plan_b = plan_shard_cache(shard, mix_b, admission, 10, Scoring::kBm25);
  auto overlap = [&](const std::vector<CachedList>& x, const std::vector<CachedList>& y) {
    std::map<TermId, std::uint32_t> in_y;
    for (const CachedList& l : y) in_y[l.term] = l.blocks;
    std::uint64_t common = 0, total = 0;
    for (const CachedList& l : x) {
      total += l.bytes;
      const auto it = in_y.find(l.term);
      if (it != in_y.end())
        common +=
            blocks_bytes(shard, shard.term(l.term).first_block, std::min(l.blocks, it->second));
    }
    return total ? double(common) / double(total) : 0.0;
  };
  OnlinePolicyOptions o;
  o.policy = CachePolicy::kVfb;
  o.lambda = 0.5;
  o.budget_bytes = budget;
  o.half_life_queries = double(mix_b.size()) / 8;
  o.replan_queries = 100;
  OnlineCachePolicy online(shard, o);
  for (int pass = 0; pass < 3; ++pass) online.observe(mix_a);
  online.drain();
  const auto after_a = online.take_plan();
  ASSERT_TRUE(after_a.has_value());
  EXPECT_GT(overlap(*after_a, plan_a), 0.8);
  for (int pass = 0; pass < 6; ++pass) online.observe(mix_b);
  online.drain();
  const auto after_b = online.take_plan();
  ASSERT_TRUE(after_b.has_value());
  EXPECT_FALSE(online.take_plan().has_value()) << "a plan is taken once";
  EXPECT_GT(overlap(*after_b, plan_b), 0.8);
  EXPECT_GT(overlap(*after_b, plan_b), overlap(*after_b, plan_a) + 0.1);
  std::uint64_t bytes = 0;
  for (const CachedList& l : *after_b) bytes += l.bytes;
  EXPECT_LE(bytes, budget);
}

// query_drift: the test log's late queries ask for other topics than its early ones, the
// training log and the default logs do not change.
TEST(SyntheticQueryDrift, LateQueriesOfADriftingLogAskForOtherTerms) {
  auto params = SyntheticParams::parse("docs=50000,seed=3,train_queries=2000,test_queries=2000");
  const SyntheticCollection plain(params);
  params.query_drift = 1.0;
  const SyntheticCollection drifting(params);
  EXPECT_EQ(plain.queries(true), drifting.queries(true));
  // Share of the last quarter's query words also seen in the first quarter.
  auto shared_late = [](const std::vector<std::pair<std::string, std::string>>& log) {
    std::map<std::string, int> early;
    const std::size_t quarter = log.size() / 4;
    for (std::size_t i = 0; i < quarter; ++i) {
      std::istringstream words(log[i].second);
      for (std::string w; words >> w;) early[w] = 1;
    }
    std::size_t seen = 0, total = 0;
    for (std::size_t i = log.size() - quarter; i < log.size(); ++i) {
      std::istringstream words(log[i].second);
      for (std::string w; words >> w; ++total) seen += early.count(w);
    }
    return double(seen) / double(total);
  };
  const double plain_share = shared_late(plain.queries(false));
  const double drift_share = shared_late(drifting.queries(false));
  EXPECT_LT(drift_share, plain_share - 0.1) << plain_share << " vs " << drift_share;
  EXPECT_THROW(SyntheticParams::parse("docs=10,query_drift=2"), InputError);
  EXPECT_FALSE(SyntheticParams::parse("docs=10").to_json().contains("query_drift"));
}

}  // namespace
