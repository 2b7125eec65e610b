// The list cache's sizing (isn/list_cache_setup: --gpu-mem, --cache-fraction, sizes, the
// throughput model), the throughput model of paper 000, eqs. 6-7 (common/cache_model), and the
// synthetic drifting log. The online policy: online_cache_policy_test.cpp.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <set>
#include <sstream>
#include <thread>

#include "common/cache_admission.hpp"
#include "common/cache_model.hpp"
#include "common/list_cache.hpp"
#include "common/reference_engine.hpp"
#include "common/result_compare.hpp"
#include "common/online_cache_policy.hpp"
#include "common/shard_index.hpp"
#include "isn/cached_cpu_engine.hpp"
#include "isn/list_cache_flags.hpp"
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

// Runs as the model says they behave: c(n) = c0 + c1 / n, a copy of b bytes takes a + t b (per
// batch), and dq falls linearly with the cache, from every byte read (1e6 per query) at zero.
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
      // wall = N (c(n) + t dq) + batches a: each batch's copy pays its fixed part once.
      s.wall_seconds = s.queries * (c0 + c1 / n + t * dq) + s.batches * a;
      s.max_batch_queries = max_n;
      s.read_bytes = 1e6 * s.queries;
      s.shipped_query_bytes = s.shipped_bytes;
      s.cache_used_bytes = s.cache_bytes;
      runs.push_back(s);
    }
  }
  return runs;
}

// --cache-no-fill reaches the options (the plans made with --cache-train and --cache-online).
TEST(ListCacheSizing, NoFillFlagTurnsTheSpareBudgetsFillOff) {
  for (const bool given : {false, true}) {
    CLI::App app;
    ListCacheEngineOptions o;
    add_list_cache_flags(app, o);
    std::vector<std::string> args = {"--cache-lambda", "1"};
    if (given) args.push_back("--cache-no-fill");
    std::reverse(args.begin(), args.end());  // CLI11 parses a reversed vector
    app.parse(args);
    EXPECT_EQ(o.fill_spare, !given);
  }
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
  EXPECT_NEAR(m.dq(0), 1e6, 1.0);               // every byte read
  EXPECT_NEAR(m.dq(0.05 * memory), 0.95e6, 1.0);
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

// A bench_list_cache row (the fields CacheRunSample::from_bench_row reads) of a run that behaves
// as: c(n) = c0 + c1 / n, a batch's copy a + t bytes, n = min(cap, lane / dq).
struct World {
  double memory = 2e8, c0 = 2e-6, c1 = 5e-3, a = 3e-4, t = 7e-11;
  double read = 229506;                // bytes each query reads
  double dedup = 0.83;                 // copied / shipped-per-query, within a batch
  std::function<double(double)> dq;    // bytes copied per query at S_c
  std::function<double(double)> used;  // bytes the plan fills of S_c
  nlohmann::json row(double share, unsigned cap) const {
    const double cache = share * memory, batch = memory - cache, d = dq(cache);
    const double queries = 10000;
    const double n = std::min(double(cap), std::floor(batch / 2 / d));
    const double batches = std::ceil(queries / n);
    const double shipped = d * queries;
    const double seconds = queries * (c0 + t * d) + batches * (c1 + a);
    return {{"ratio", 10.0},
            {"policy", "vfb:1"},
            {"memory_bytes", memory},
            {"cache_share", share},
            {"cache_bytes", cache},
            {"batch_bytes", batch},
            {"batch_cap", cap},
            {"queries", queries},
            {"seconds", seconds},
            {"queries_per_second", queries / seconds},
            {"h2d_seconds", batches * a + t * shipped},
            {"batch_ms_p95", 1e3 * seconds / batches},
            {"list_cache",
             {{"batches", batches},
              {"bytes_shipped_total", shipped},
              {"bytes_shipped", shipped / dedup},
              {"bytes_hit", read * queries - shipped / dedup},
              {"bytes_unavailable", 0.0},
              {"device", {{"cache_used_bytes", used(cache)}}}}}};
  }
};

ThroughputModel fit_rows(const std::vector<nlohmann::json>& rows) {
  std::vector<CacheRunSample> samples;
  for (const auto& r : rows) samples.push_back(CacheRunSample::from_bench_row(r));
  return ThroughputModel::fit(samples);
}

// The H100 run's case: every measured cache (0.6 to 0.9 of M) held the whole plan (35% of M)
// and shipped the same bytes per query. dq is flat there, but not below: a zero cache ships all
// that the queries read. The model once extrapolated dq flat to S_c = 0 and, spreading a
// copy's fixed cost over the whole lane, chose S_c = 0.
TEST(ThroughputModel, DoesNotShipFromAnEmptyCacheWhatAFullOneShips) {
  World w;
  w.memory = 5.18e8;
  w.c1 = 1e-3;
  w.dq = [&](double c) {  // a plan filling 35% of M, ships 4.4 KB per query beside it
    const double knee = 0.35 * w.memory;
    return c >= knee ? 4387.0 : 4387.0 + (w.read * w.dedup - 4387.0) * (1 - c / knee);
  };
  w.used = [&](double c) { return std::min(c, 0.35 * w.memory); };
  nlohmann::json report = {{"sweep", nlohmann::json::array()}};
  for (unsigned cap : {4096u, 512u})
    for (double share : {0.6, 0.8, 0.9}) report["sweep"].push_back(w.row(share, cap));
  const auto rows = bench_rows(report, 10.0, "vfb:1");
  ASSERT_EQ(rows.size(), 6u);
  EXPECT_TRUE(bench_rows(report, 2.5, "vfb:1").empty());
  const ThroughputModel m = fit_rows(rows);
  EXPECT_NEAR(m.dq(0.7 * w.memory), 4387.0, 1e-6);
  EXPECT_NEAR(m.dq(0.35 * w.memory), 4387.0, 1e-6);       // the plan fits there too
  EXPECT_NEAR(m.dq(0), w.read * w.dedup, 1e-6 * w.read);  // all that is read
  EXPECT_GT(m.c1, 0);
  const CacheSplit choice = m.choose(w.memory, w.memory * 0.01, 4096, 0);
  ASSERT_TRUE(choice.feasible);
  EXPECT_GE(choice.cache_bytes / w.memory, 0.34);
  EXPECT_LT(m.at(0, w.memory, 4096, 0).throughput, 0.5 * choice.throughput);
  // Against the rows: the best measured split is the model's first.
  const nlohmann::json cmp = compare_with_measured(m, rows, w.memory, 4096, 0);
  EXPECT_EQ(cmp["model_ranks_first_cache_share"], cmp["measured_cache_share"]);
  EXPECT_EQ(cmp["model_ranks_first_batch_cap"], cmp["measured_batch_cap"]);
  EXPECT_EQ(cmp["measured_batch_cap"], 4096u);
  // Older rows without reads or fill: no choice below the smallest measured cache.
  std::vector<CacheRunSample> bare;
  for (const auto& r : rows) {
    CacheRunSample s = CacheRunSample::from_bench_row(r);
    s.read_bytes = 0;
    s.cache_used_bytes = -1;
    bare.push_back(s);
  }
  const ThroughputModel old = ThroughputModel::fit(bare);
  EXPECT_NEAR(old.dq_known_from(), 0.6 * w.memory, 1.0);
  EXPECT_GE(old.choose(w.memory, w.memory * 0.01, 4096, 0).cache_bytes, 0.6 * w.memory - 1.0);
}

// Rows whose caches ship different bytes per query give different dq, and where a larger cache
// costs batch volume (a lane of S_b / 2 holds fewer queries), the model ranks the measured best
// split first and chooses next to it.
TEST(ThroughputModel, ChoosesTheMeasuredBestWhereTheCacheTradesAgainstTheBatch) {
  World w;
  w.dq = [&](double c) { return 2e3 + 2e5 * std::pow(1 - c / w.memory, 3); };
  w.used = [](double c) { return c; };
  std::vector<nlohmann::json> rows;
  for (unsigned cap : {4096u, 1024u})
    for (double share : {0.3, 0.5, 0.7, 0.8, 0.9, 0.95, 0.98}) rows.push_back(w.row(share, cap));
  const ThroughputModel m = fit_rows(rows);
  for (double share : {0.3, 0.5, 0.7, 0.8, 0.9, 0.95, 0.98})
    EXPECT_NEAR(m.dq(share * w.memory), w.dq(share * w.memory), 1e-6 * w.dq(0));
  EXPECT_GT(m.dq(0.5 * w.memory), 2 * m.dq(0.8 * w.memory));
  EXPECT_NEAR(m.c1, w.c1, 1e-3 * w.c1);
  const nlohmann::json cmp = compare_with_measured(m, rows, w.memory, 4096, 0);
  EXPECT_EQ(cmp["measured_cache_share"], 0.9);  // the world's best measured split
  EXPECT_EQ(cmp["model_ranks_first_cache_share"], cmp["measured_cache_share"]);
  EXPECT_EQ(cmp["model_ranks_first_batch_cap"], cmp["measured_batch_cap"]);
  const double chosen = cmp["predicted_cache_share"].get<double>();
  EXPECT_GT(chosen, 0.8);
  EXPECT_LT(chosen, 0.95);
  // A response bound below the measured best's batch time moves the choice and is met.
  const nlohmann::json bounded = compare_with_measured(m, rows, w.memory, 4096, 8.0);
  EXPECT_TRUE(bounded["feasible"].get<bool>());
  EXPECT_LE(m.choose(w.memory, w.memory * 0.01, 4096, 8.0).response_ms, 8.0 + 1e-9);
}

// The committed H100 report (results/list-cache/h100-2026-11-24): fitted again from its model
// rows, the model no longer chooses an empty cache (the run's own fit chose S_c = 0), knows that
// a zero cache ships what queries read, and does not choose below the plan's fill (0.35 M).
TEST(ThroughputModel, RefitOfTheH100RunChoosesACacheThatHoldsThePlan) {
  const std::filesystem::path file = std::filesystem::path(GPUSEARCH_SOURCE_DIR) /
                                     "tests/benchmarks/results/list-cache/h100-2026-11-24/"
                                     "cache_bench.json";
  std::ifstream in(file);
  ASSERT_TRUE(in) << file;
  const nlohmann::json report = nlohmann::json::parse(in);
  const auto rows = bench_rows(report, 2.5, "vfb:1+tails");
  ASSERT_EQ(rows.size(), 6u);  // shares 0.6, 0.8, 0.9 at caps 4096 and 512
  const ThroughputModel m = fit_rows(rows);
  const double memory = rows.front().at("memory_bytes").get<double>();
  EXPECT_GT(m.dq(0), 20 * m.dq(0.6 * memory));
  EXPECT_DOUBLE_EQ(m.dq(0.35 * memory), m.dq(0.6 * memory));
  const nlohmann::json cmp = compare_with_measured(m, rows, memory, 4096, 0);
  EXPECT_GE(cmp["predicted_cache_share"].get<double>(), 0.34);
  EXPECT_EQ(cmp["measured_cache_share"], 0.6);
  EXPECT_EQ(cmp["model_ranks_first_cache_share"], 0.6);
  // The run's own fit (the old one) is in the report: it chose 0.
  EXPECT_EQ(report["model"]["comparison"][0]["predicted_cache_share"].get<double>(), 0.0);
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
