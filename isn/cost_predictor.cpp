#include "isn/cost_predictor.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include <fmt/format.h>

#include "common/error.hpp"
#include "common/lazy_list.hpp"
#include "isn/boosted_cost_model.hpp"
#include "isn/least_squares.hpp"

namespace gpusearch {

std::string_view to_string(Processor p) {
  return p == Processor::kCpu ? "cpu" : "gpu";
}

QueryFeatures query_features(const ShardIndex& shard, const Query& query) {
  QueryFeatures f;
  std::vector<double> lengths;
  lengths.reserve(query.terms.size());
  const double docs = std::max(1.0, double(shard.num_docs()));
  f.and_estimate = query.terms.empty() ? 0 : docs;
  for (TermId t : query.terms) {
    const TermInfo& info = shard.term(t);
    lengths.push_back(double(info.df_shard));
    f.total += double(info.df_shard);
    f.total_blocks += info.num_blocks;
    f.and_estimate *= double(info.df_shard) / docs;
  }
  std::sort(lengths.begin(), lengths.end());
  f.terms = double(lengths.size());
  if (!lengths.empty()) f.shortest = lengths[0];
  if (lengths.size() > 1) f.second_shortest = lengths[1];
  return f;
}

std::optional<bool> and_matches_reach(const ShardIndex& shard, const Query& query,
                                      std::uint32_t k, std::uint32_t max_blocks) {
  if (k == 0) return true;
  if (query.terms.empty()) return false;
  std::vector<TermId> terms(query.terms.begin(), query.terms.end());
  std::sort(terms.begin(), terms.end(), [&](TermId a, TermId b) {
    return shard.term(a).df_shard < shard.term(b).df_shard;
  });
  if (shard.term(terms[0]).df_shard < k) return false;  // the AND is no longer than any list
  if (terms.size() == 1) return true;
  std::vector<LazyList> lists;  // shortest first
  lists.reserve(terms.size());
  for (TermId t : terms) lists.emplace_back(shard, t, /*with_freqs=*/false);
  // Leapfrog: every list moves to the candidate; a list past it makes its document the next.
  std::uint32_t matches = 0;
  DocId d = 0;
  for (;;) {
    std::uint32_t loaded = 0;
    for (const LazyList& l : lists) loaded += l.blocks_loaded();
    if (loaded > max_blocks) return std::nullopt;
    bool all = true;
    for (LazyList& l : lists) {
      if (!l.seek(d)) return false;  // a list ended: no more matches
      if (l.current_doc() != d) {
        d = l.current_doc();
        all = false;
        break;
      }
    }
    if (!all) continue;
    if (++matches >= k) return true;
    if (d == std::numeric_limits<DocId>::max()) return false;
    ++d;
  }
}

QueryFeatures query_features(const ShardIndex& shard, const Query& query,
                             const SearchParams& params, std::uint32_t and_probe_blocks) {
  QueryFeatures f = query_features(shard, query);
  if (and_probe_blocks > 0 && params.mode == Mode::kAndOr && !query.terms.empty()) {
    const std::optional<bool> reaches = and_matches_reach(shard, query, params.k, and_probe_blocks);
    // Undecided within the budget: mostly queries with few matches (many reach k early).
    f.and_reaches_k = !reaches ? 0.5 : *reaches ? 1 : 0;
  }
  return f;
}

namespace {

std::array<double, CostModel::kFeatures> regressors(const QueryFeatures& f) {
  return {1.0, std::log1p(f.shortest), std::log1p(f.second_shortest), std::log1p(f.total), f.terms};
}

constexpr double kMinSeconds = kMinCostSeconds;

}  // namespace

CostModel CostModel::fit(std::span<const CostSample> samples) {
  constexpr std::size_t n = kFeatures;
  if (samples.size() < 2 * n)
    throw Error(
        fmt::format("cost model: {} samples; at least {} are needed", samples.size(), 2 * n));
  // Normal equations (X^T X + ridge I) w = X^T y, augmented as [A | b].
  std::array<std::array<double, n + 1>, n> a{};
  for (const CostSample& s : samples) {
    const auto x = regressors(s.features);
    const double y = std::log(std::max(s.seconds, kMinSeconds));
    for (std::size_t i = 0; i < n; ++i) {
      for (std::size_t j = 0; j < n; ++j) a[i][j] += x[i] * x[j];
      a[i][n] += x[i] * y;
    }
  }
  // A tiny ridge keeps the system solvable when a feature is constant (all one-term queries:
  // second_shortest is always 0), without moving a well-posed fit.
  for (std::size_t i = 1; i < n; ++i) a[i][i] += 1e-9 * (1.0 + a[i][i]);
  CostModel model;
  model.w_ = solve_augmented<n>(a);
  model.w_[0] += std::log(relative_error_scale(model, samples));
  return model;
}

double CostModel::relative_error_scale(const CostModel& model,
                                       std::span<const CostSample> samples) {
  return best_relative_error_scale(
      samples, [&](const QueryFeatures& f) { return model.predict_seconds(f); });
}

double mean_relative_error_of(std::span<const CostSample> samples,
                              const std::function<double(const QueryFeatures&)>& predict) {
  if (samples.empty()) return 0;
  double sum = 0;
  for (const CostSample& s : samples) {
    const double measured = std::max(s.seconds, kMinSeconds);
    sum += std::abs(predict(s.features) - measured) / measured;
  }
  return sum / double(samples.size());
}

double best_relative_error_scale(std::span<const CostSample> samples,
                                 const std::function<double(const QueryFeatures&)>& predict) {
  // sum_i |s p_i - y_i| / y_i = sum_i (p_i / y_i) |s - y_i / p_i|: minimized by the median of
  // the ratios y_i / p_i weighted by p_i / y_i.
  std::vector<std::pair<double, double>> ratio_weight;
  double total = 0;
  for (const CostSample& c : samples) {
    const double y = std::max(c.seconds, kMinSeconds), p = predict(c.features);
    ratio_weight.push_back({y / p, p / y});
    total += p / y;
  }
  if (ratio_weight.empty() || !(total > 0)) return 1.0;
  std::sort(ratio_weight.begin(), ratio_weight.end());
  double seen = 0;
  for (const auto& [ratio, weight] : ratio_weight) {
    seen += weight;
    if (seen >= total / 2) return ratio;
  }
  return ratio_weight.back().first;
}

double CostModel::predict_seconds(const QueryFeatures& f) const {
  const auto x = regressors(f);
  double z = 0;
  for (std::size_t i = 0; i < kFeatures; ++i) z += w_[i] * x[i];
  return std::exp(std::clamp(z, -30.0, 10.0));
}

double CostModel::mean_relative_error(std::span<const CostSample> samples) const {
  return mean_relative_error_of(samples,
                                [this](const QueryFeatures& f) { return predict_seconds(f); });
}

nlohmann::json CostModel::to_json() const {
  return {{"target", "ln(seconds)"},
          {"regressors", {"1", "ln(1+shortest)", "ln(1+second_shortest)", "ln(1+total)", "terms"}},
          {"weights", w_}};
}

std::size_t ProcessorCostModel::leaf(const QueryFeatures& f) {
  return std::min<std::size_t>(kLeaves, std::max<std::size_t>(1, std::size_t(f.terms))) - 1;
}

CostModelKind parse_cost_model_kind(std::string_view name) {
  if (name == "linear") return CostModelKind::kLinear;
  if (name == "trees") return CostModelKind::kTrees;
  if (name == "best") return CostModelKind::kBest;
  throw InputError("--scheduler-cost-model", 0,
                   fmt::format("'{}': give linear, trees or best", name));
}

std::string_view to_string(CostModelKind k) {
  switch (k) {
    case CostModelKind::kLinear:
      return "linear";
    case CostModelKind::kTrees:
      return "trees";
    case CostModelKind::kBest:
      return "best";
  }
  return "?";
}

ProcessorCostModel ProcessorCostModel::fit(std::span<const CostSample> samples,
                                           CostModelKind kind) {
  ProcessorCostModel m;
  m.overall_ = CostModel::fit(samples);
  std::array<std::vector<CostSample>, kLeaves> by_leaf;
  for (const CostSample& s : samples) by_leaf[leaf(s.features)].push_back(s);
  for (std::size_t i = 0; i < kLeaves; ++i)
    if (by_leaf[i].size() >= kMinLeafSamples) m.leaves_[i] = CostModel::fit(by_leaf[i]);
  if (kind == CostModelKind::kTrees) {
    m.trees_ = std::make_shared<const BoostedCostModel>(BoostedCostModel::fit(samples));
  } else if (kind == CostModelKind::kBest &&
             samples.size() >= 4 * BoostedCostModel::kMinSamples / 3) {
    // Both kinds fitted on three quarters, judged on the fourth; the better one refitted on all.
    std::vector<CostSample> fit_part, held_out;
    for (std::size_t s = 0; s < samples.size(); ++s)
      (s % 4 == 3 ? held_out : fit_part).push_back(samples[s]);
    const double linear = ProcessorCostModel::fit(fit_part).mean_relative_error(held_out);
    const double trees = BoostedCostModel::fit(fit_part).mean_relative_error(held_out);
    m.choice_ = {{"linear_held_out_error", linear}, {"trees_held_out_error", trees}};
    if (trees < linear)
      m.trees_ = std::make_shared<const BoostedCostModel>(BoostedCostModel::fit(samples));
  }
  return m;
}

ProcessorCostModel ProcessorCostModel::refit(std::span<const CostSample> samples) const {
  ProcessorCostModel m = fit(samples, CostModelKind::kLinear);
  if (trees_) {
    m.trees_ = std::make_shared<const BoostedCostModel>(trees_->rescaled(samples));
    m.choice_ = choice_;
  }
  return m;
}

double ProcessorCostModel::linear_seconds(const QueryFeatures& f) const {
  const auto& l = leaves_[leaf(f)];
  return l ? l->predict_seconds(f) : overall_.predict_seconds(f);
}

double ProcessorCostModel::predict_seconds(const QueryFeatures& f) const {
  return trees_ ? trees_->predict_seconds(f) : linear_seconds(f);
}

double ProcessorCostModel::mean_relative_error(std::span<const CostSample> samples) const {
  return mean_relative_error_of(samples,
                                [this](const QueryFeatures& f) { return predict_seconds(f); });
}

nlohmann::json ProcessorCostModel::to_json() const {
  nlohmann::json j = {{"overall", overall_.to_json()},
                      {"by_terms", nlohmann::json::object()},
                      {"predicts_with", trees_ ? "trees" : "linear"}};
  if (trees_) j["trees"] = trees_->to_json();
  if (!choice_.is_null()) j["choice"] = choice_;
  for (std::size_t i = 0; i < kLeaves; ++i)
    if (leaves_[i])
      j["by_terms"][i + 1 == kLeaves ? fmt::format("{}+", kLeaves) : std::to_string(i + 1)] =
          leaves_[i]->weights();
  return j;
}

CostPredictor CostPredictor::train(std::span<const CostSample> cpu_log,
                                   std::span<const CostSample> gpu_log, nlohmann::json* report,
                                   CostModelKind kind) {
  CostPredictor p;
  const std::array<std::span<const CostSample>, kProcessors> logs{cpu_log, gpu_log};
  for (std::size_t i = 0; i < kProcessors; ++i) {
    std::vector<CostSample> fit_part, held_out;
    for (std::size_t s = 0; s < logs[i].size(); ++s)
      (s % 4 == 3 ? held_out : fit_part).push_back(logs[i][s]);
    double held_out_error = NAN, held_out_error_single = NAN;
    if (fit_part.size() >= 2 * CostModel::kFeatures && !held_out.empty()) {
      held_out_error = ProcessorCostModel::fit(fit_part, kind).mean_relative_error(held_out);
      held_out_error_single = CostModel::fit(fit_part).mean_relative_error(held_out);
    }
    p.models_[i] = ProcessorCostModel::fit(logs[i], kind);
    if (report)
      (*report)[std::string(to_string(Processor(i)))] = {
          {"samples", logs[i].size()},
          {"held_out_samples", held_out.size()},
          {"mean_relative_error_held_out", held_out_error},
          // The same with one linear model for every term count, for comparison.
          {"mean_relative_error_held_out_one_model", held_out_error_single},
          {"mean_relative_error_training", p.models_[i].mean_relative_error(logs[i])},
          {"model", p.models_[i].to_json()}};
  }
  return p;
}

CostEstimate CostPredictor::predict(const QueryFeatures& f) const {
  CostEstimate e;
  for (std::size_t i = 0; i < kProcessors; ++i) e.seconds[i] = models_[i].predict_seconds(f);
  return e;
}

}  // namespace gpusearch
