// Boosted regression trees for a query's cost on one processor (issue 11's cost predictor).
//
// Why: the linear model of the logarithms (cost_predictor.hpp) misses by about half on the CPU
// engine (mean relative error 0.54 on the build machine, 0.62 on the H200, synthetic 1M-2.5M
// documents, and-or). Most of that is whether and-or's OR phase runs (45% of the queries; it
// doubles or triples a query's cost): a nonlinear function of the list lengths and the AND
// estimate that a linear model cannot separate, and trees can. Boosted trees on the same
// features: 0.37 (tests/benchmarks/NOTES-scheduler.md, session 32).
//
// Trained with XGBoost (Debian's libxgboost, the C API) on ln(seconds) over the features'
// logarithms, then read back through its JSON model (isn/ranker/xgboost_model.hpp) and walked
// natively: a prediction is a few dozen node visits, no library call per query. As CostModel
// does, the predictions are then scaled by the factor that minimizes the mean relative error
// on the training samples.
#pragma once

#include <array>
#include <span>

#include <nlohmann/json_fwd.hpp>

#include "common/ranker/model_layout.hpp"
#include "isn/cost_predictor.hpp"
#include "isn/ranker/xgboost_model.hpp"

namespace gpusearch {

struct BoostedCostOptions {
  unsigned rounds = 50;
  unsigned max_depth = 3;
  double learning_rate = 0.25;
};

class BoostedCostModel {
 public:
  static constexpr std::size_t kFeatures = 7;
  static constexpr std::size_t kMinSamples = 40;
  // Throws Error with fewer than kMinSamples samples, or with XGBoost's message.
  static BoostedCostModel fit(std::span<const CostSample> samples, BoostedCostOptions options = {});
  double predict_seconds(const QueryFeatures& f) const;
  // The same trees, scaled to minimize the mean relative error on `samples` (an online refit).
  BoostedCostModel rescaled(std::span<const CostSample> samples) const;
  double mean_relative_error(std::span<const CostSample> samples) const;
  nlohmann::json to_json() const;  // trees, depth, scale

 private:
  static std::array<float, kFeatures> row(const QueryFeatures& f);
  double unscaled_seconds(const QueryFeatures& f) const;
  ranker::XgboostModel model_;
  double scale_ = 1.0;
  BoostedCostOptions options_;
};

}  // namespace gpusearch
