#include "isn/boosted_cost_model.hpp"

#include <xgboost/c_api.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/error.hpp"

namespace gpusearch {

namespace {

// XGBoost's handles, freed whatever happens (RAII).
struct DMatrixFree {
  void operator()(void* h) const { XGDMatrixFree(h); }
};
struct BoosterFree {
  void operator()(void* h) const { XGBoosterFree(h); }
};
using DMatrix = std::unique_ptr<void, DMatrixFree>;
using Booster = std::unique_ptr<void, BoosterFree>;

void check(int rc, const char* what) {
  if (rc != 0)
    throw Error(fmt::format("cost model: XGBoost {} failed: {}", what, XGBGetLastError()));
}

}  // namespace

std::array<float, BoostedCostModel::kFeatures> BoostedCostModel::row(const QueryFeatures& f) {
  return {float(f.terms),
          float(std::log1p(f.shortest)),
          float(std::log1p(f.second_shortest)),
          float(std::log1p(f.total)),
          float(std::log1p(double(f.total_blocks))),
          float(std::log1p(f.and_estimate)),
          float(f.and_reaches_k)};
}

BoostedCostModel BoostedCostModel::fit(std::span<const CostSample> samples,
                                       BoostedCostOptions options) {
  if (samples.size() < kMinSamples)
    throw Error(fmt::format("cost model: {} samples; boosted trees need at least {}",
                            samples.size(), kMinSamples));
  std::vector<float> data, labels;
  data.reserve(samples.size() * kFeatures);
  for (const CostSample& s : samples) {
    const auto r = row(s.features);
    data.insert(data.end(), r.begin(), r.end());
    labels.push_back(float(std::log(std::max(s.seconds, kMinCostSeconds))));
  }
  DMatrixHandle d_raw = nullptr;
  check(XGDMatrixCreateFromMat(data.data(), samples.size(), kFeatures, NAN, &d_raw),
        "XGDMatrixCreateFromMat");
  DMatrix d(d_raw);
  check(XGDMatrixSetFloatInfo(d.get(), "label", labels.data(), labels.size()), "set labels");
  BoosterHandle b_raw = nullptr;
  DMatrixHandle train[1] = {d.get()};
  check(XGBoosterCreate(train, 1, &b_raw), "XGBoosterCreate");
  Booster b(b_raw);
  const std::string depth = std::to_string(options.max_depth);
  const std::string eta = fmt::format("{}", options.learning_rate);
  for (const auto& [key, value] :
       {std::pair<const char*, const char*>{"objective", "reg:squarederror"},
        {"booster", "gbtree"},
        {"tree_method", "exact"},
        {"max_depth", depth.c_str()},
        {"eta", eta.c_str()},
        {"nthread", "1"},  // a few thousand samples: threads cost more than they save
        {"seed", "0"},
        {"verbosity", "0"}})
    check(XGBoosterSetParam(b.get(), key, value), "XGBoosterSetParam");
  for (unsigned i = 0; i < options.rounds; ++i)
    check(XGBoosterUpdateOneIter(b.get(), int(i), d.get()), "XGBoosterUpdateOneIter");
  bst_ulong length = 0;
  const char* buffer = nullptr;
  check(XGBoosterSaveModelToBuffer(b.get(), R"({"format": "json"})", &length, &buffer),
        "XGBoosterSaveModelToBuffer");
  BoostedCostModel m;
  m.options_ = options;
  m.model_ = ranker::parse_xgboost_json(nlohmann::json::parse(buffer, buffer + length),
                                        "the cost model's trees");
  m.scale_ = best_relative_error_scale(
      samples, [&m](const QueryFeatures& f) { return m.unscaled_seconds(f); });
  return m;
}

double BoostedCostModel::unscaled_seconds(const QueryFeatures& f) const {
  const auto r = row(f);
  double z = model_.base_margin;
  for (const auto& tree : model_.trees) z += ranker::walk_tree(tree.data(), r.data());
  return std::exp(std::clamp(z, -30.0, 10.0));
}

BoostedCostModel BoostedCostModel::rescaled(std::span<const CostSample> samples) const {
  BoostedCostModel m = *this;
  if (!samples.empty())
    m.scale_ = best_relative_error_scale(
        samples, [this](const QueryFeatures& f) { return unscaled_seconds(f); });
  return m;
}

double BoostedCostModel::predict_seconds(const QueryFeatures& f) const {
  return scale_ * unscaled_seconds(f);
}

double BoostedCostModel::mean_relative_error(std::span<const CostSample> samples) const {
  return mean_relative_error_of(samples,
                                [this](const QueryFeatures& f) { return predict_seconds(f); });
}

nlohmann::json BoostedCostModel::to_json() const {
  return {{"kind", "boosted trees (XGBoost)"},
          {"trees", model_.trees.size()},
          {"max_depth", options_.max_depth},
          {"learning_rate", options_.learning_rate},
          {"scale", scale_}};
}

}  // namespace gpusearch
