// bench_scheduler's cost predictor: trained on the training queries' logged costs, its error
// measured on the test queries (each timed alone on both processors as the training queries
// were), the features' own cost per query, and the mean lone costs behind the rate estimates.
#pragma once

#include <algorithm>
#include <cstddef>
#include <filesystem>
#include <ostream>
#include <span>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/metrics.hpp"
#include "isn/coprocessor_scheduler.hpp"
#include "isn/cost_predictor.hpp"
#include "sched_cost_log.hpp"

namespace gpusearch::bench {

struct TrainedPredictor {
  CostPredictor predictor;
  nlohmann::json report;  // CostPredictor::train's, with the test errors and the features' cost
  std::size_t timed = 0;  // test queries timed alone
  double mean_cpu = 0, mean_gpu = 0;  // their mean lone cost on each processor, seconds
  double best_sum = 0;                // the sum over them of the better processor's cost
};

// Trains on `train`, times the first 1,000 of `test`; writes both logs to cost_log_path unless
// it is empty; prints the predictor's line to `out`.
inline TrainedPredictor train_predictor(const ShardIndex& shard, std::span<const Query> train,
                                        std::span<const Query> test, const SearchParams& params,
                                        QueryEngine& cpu, QueryEngine& gpu,
                                        const CostLogOptions& options, CostModelKind kind,
                                        const std::filesystem::path& cost_log_path,
                                        std::ostream& out) {
  TrainedPredictor t;
  metrics::Stopwatch train_watch;
  const CostLog train_log = log_query_costs(shard, train, params, cpu, gpu, options);
  t.predictor =
      CostPredictor::train(train_log.samples[0], train_log.samples[1], &t.report, kind);
  const double train_seconds = train_watch.seconds();
  t.timed = std::min<std::size_t>(test.size(), 1000);  // all have terms
  const CostLog test_cost_log =
      log_query_costs(shard, test.first(t.timed), params, cpu, gpu, options);
  const auto& test_log = test_cost_log.samples;
  double cpu_sum = 0, gpu_sum = 0;
  for (std::size_t i = 0; i < test_log[0].size(); ++i) {
    cpu_sum += test_log[0][i].seconds;
    gpu_sum += test_log[1][i].seconds;
    t.best_sum += std::min(test_log[0][i].seconds, test_log[1][i].seconds);
  }
  if (!cost_log_path.empty()) write_cost_log(cost_log_path, train_log, test_cost_log);
  t.report["cpu"]["mean_relative_error_test"] =
      t.predictor.model(Processor::kCpu).mean_relative_error(test_log[0]);
  t.report["gpu"]["mean_relative_error_test"] =
      t.predictor.model(Processor::kGpu).mean_relative_error(test_log[1]);
  t.report["training_seconds"] = train_seconds;
  {
    // What the scheduler pays per submitted query for the features (and-or's probe included).
    metrics::Stopwatch watch;
    double sink = 0;  // keeps the loop from being optimized away
    for (const Query& q : test)
      sink += query_features(shard, q, params, options.and_probe_blocks).and_reaches_k;
    t.report["features_us_per_query"] = 1e6 * watch.seconds() / double(test.size());
    t.report["and_probe_blocks"] = options.and_probe_blocks;
    (void)sink;
  }
  t.mean_cpu = cpu_sum / double(t.timed);
  t.mean_gpu = gpu_sum / double(t.timed);
  out << fmt::format(
      "predictor: mean relative error CPU {:.1f}% GPU {:.1f}% (held-out training queries), "
      "CPU {:.1f}% GPU {:.1f}% (test queries); mean cost alone CPU {:.3f} ms, GPU {:.3f} ms, "
      "better of the two {:.3f} ms; features {:.2f} us a query\n",
      100 * t.report["cpu"]["mean_relative_error_held_out"].get<double>(),
      100 * t.report["gpu"]["mean_relative_error_held_out"].get<double>(),
      100 * t.report["cpu"]["mean_relative_error_test"].get<double>(),
      100 * t.report["gpu"]["mean_relative_error_test"].get<double>(), 1e3 * t.mean_cpu,
      1e3 * t.mean_gpu, 1e3 * t.best_sum / double(t.timed),
      t.report["features_us_per_query"].get<double>());
  return t;
}

}  // namespace gpusearch::bench
