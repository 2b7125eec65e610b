// Per-query cost prediction for the CPU/GPU scheduler (paper 001, section 9): a query's cost on
// each processor is predicted from the lengths of its lists, trained on logged per-query costs.
// Paper 001 uses Weka's M5Rules on four features (shortest and second-shortest list lengths,
// the sum of the lengths, the term count) and reports a mean relative error of 22% (GPU) and
// 20% (CPU). Here: a least-squares fit of ln(cost) on the logarithms of the same features (costs
// span four orders of magnitude and grow about as a power of the lengths, which a linear model
// of the logarithms captures; a linear model of raw seconds would be dominated by the longest
// queries and miss the short ones by several times), split on the term count (1, 2, 3, 4 or
// more: a one-level model tree in the spirit of M5, whose leaves are linear models), with the
// fit over all queries for a term count with too few samples.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/query.hpp"
#include "common/search_result.hpp"
#include "common/shard_index.hpp"

namespace gpusearch {

// The two processors of an ISN. "gpu" is whichever engine runs beside the CPU engine (the GPU
// engine on a GPU host; tests put a second CPU-side engine there).
enum class Processor : std::uint8_t { kCpu = 0, kGpu = 1 };
inline constexpr std::size_t kProcessors = 2;
std::string_view to_string(Processor p);
inline Processor other(Processor p) {
  return p == Processor::kCpu ? Processor::kGpu : Processor::kCpu;
}

struct QueryFeatures {
  double shortest = 0;         // postings of the shortest list in this shard (0: no terms)
  double second_shortest = 0;  // of the second-shortest (0 for one term)
  double total = 0;            // sum of the lists' postings
  double terms = 0;
  std::uint64_t total_blocks = 0;  // blocks of all the query's lists (paper 002's LBD measure)
  // AND matches expected if the terms occurred independently: N * prod(df_i / N) over the
  // shard's N documents. and-or runs its OR phase only when AND finds fewer than k, which
  // doubles or triples a query's cost: this tells the two apart before the query runs.
  double and_estimate = 0;
  // and-or with the probe on (query_features with SearchParams and a block budget): 1 where the
  // AND phase finds k matches, so the OR phase will not run; 0 where it falls short; 0.5 where
  // the budget ran out first; -1 not probed. Whether the OR phase runs is most of the cost
  // predictor's error (NOTES-scheduler.md, session 36: on the H200, knowing it takes the GPU
  // side from 24% to 11%), and the independence estimate above does not tell it.
  double and_reaches_k = -1;
};
QueryFeatures query_features(const ShardIndex& shard, const Query& query);
// The same, and with and-or and and_probe_blocks > 0 the probe of and_reaches_k: the query's
// lists intersected, shortest first with skips over blocks, until k matches are found, a list
// ends, or and_probe_blocks blocks are decoded. Where matches are many the k-th comes early;
// where they are few the query's OR phase costs many times the probe.
QueryFeatures query_features(const ShardIndex& shard, const Query& query,
                             const SearchParams& params, std::uint32_t and_probe_blocks);
// Whether the query's terms co-occur in at least k of the shard's documents (true for k = 0);
// nullopt where the answer needs more than max_blocks blocks decoded.
std::optional<bool> and_matches_reach(const ShardIndex& shard, const Query& query,
                                      std::uint32_t k, std::uint32_t max_blocks = ~0u);

// Costs below a microsecond are timer noise; logarithms and relative errors need a floor.
inline constexpr double kMinCostSeconds = 1e-7;

struct CostSample {
  QueryFeatures features;
  double seconds = 0;
  bool or_ran = false;  // and-or: the AND answer was short of k, so the OR phase ran too
  // The run's work (the engine's counters), to tell a cost model's error from the work's.
  std::uint64_t postings_decoded = 0;
  std::uint64_t docs_scored = 0;
};

// Paper 001's measure: the mean of |predict(features) - measured| / measured over the samples
// (costs floored at kMinCostSeconds).
double mean_relative_error_of(std::span<const CostSample> samples,
                              const std::function<double(const QueryFeatures&)>& predict);
// The factor s that minimizes paper 001's mean relative error, the sum of |s p_i - y_i| / y_i
// over the samples, for predictions p_i = predict(features_i) of measured costs y_i.
double best_relative_error_scale(std::span<const CostSample> samples,
                                 const std::function<double(const QueryFeatures&)>& predict);

// ln(seconds) = w . x(features), fitted by least squares (normal equations with a tiny ridge
// term, solved by Gaussian elimination with partial pivoting: five unknowns); then the intercept
// is moved so that the model minimizes paper 001's measure, the mean relative error, on the fit
// samples. Least squares in log space predicts a class of queries' geometric mean cost; where
// costs with equal features spread over a factor of 3 or more (and-or's OR phase runs or not,
// GS early termination stops early or late), that overpredicts the cheap ones by several times,
// and the mean relative error, which is unbounded above but at most 100% below, went past 100%.
class CostModel {
 public:
  static constexpr std::size_t kFeatures = 5;
  // Throws Error with fewer than 2 * kFeatures samples.
  static CostModel fit(std::span<const CostSample> samples);
  // The factor s that minimizes the mean relative error of s * model on the samples.
  static double relative_error_scale(const CostModel& model, std::span<const CostSample> samples);
  double predict_seconds(const QueryFeatures& f) const;
  // Mean of |predicted - measured| / measured over the samples (paper 001's measure).
  double mean_relative_error(std::span<const CostSample> samples) const;
  const std::array<double, kFeatures>& weights() const { return w_; }
  nlohmann::json to_json() const;

 private:
  std::array<double, kFeatures> w_{};
};

class BoostedCostModel;  // boosted_cost_model.hpp

// Which model a processor's costs get: the linear ones below; boosted trees
// (boosted_cost_model.hpp); or whichever of the two misses less on a held-out quarter of the
// samples (the default, --scheduler-cost-model).
enum class CostModelKind { kLinear, kTrees, kBest };
CostModelKind parse_cost_model_kind(std::string_view name);  // throws InputError
std::string_view to_string(CostModelKind k);

// One processor's model: a CostModel per term count (1, 2, 3, 4+) where the log has at least
// kMinLeafSamples of them, else the CostModel fitted on every sample; with kTrees (or kBest
// where they miss less), boosted trees predict instead.
class ProcessorCostModel {
 public:
  static constexpr std::size_t kLeaves = 4;
  static constexpr std::size_t kMinLeafSamples = 6 * CostModel::kFeatures;
  static ProcessorCostModel fit(std::span<const CostSample> samples,
                                CostModelKind kind = CostModelKind::kLinear);
  // An online refit on recent costs: the linear models are fitted again; trees keep their
  // shape and only their scale follows the samples (training trees at every refit would cost
  // tens of milliseconds, every 512 CPU jobs).
  ProcessorCostModel refit(std::span<const CostSample> samples) const;
  double predict_seconds(const QueryFeatures& f) const;
  double mean_relative_error(std::span<const CostSample> samples) const;
  const CostModel& overall() const { return overall_; }
  bool uses_trees() const { return trees_ != nullptr; }
  nlohmann::json to_json() const;

 private:
  static std::size_t leaf(const QueryFeatures& f);
  double linear_seconds(const QueryFeatures& f) const;
  CostModel overall_;
  std::array<std::optional<CostModel>, kLeaves> leaves_;
  std::shared_ptr<const BoostedCostModel> trees_;  // null: the linear models predict
  nlohmann::json choice_;  // how kBest chose (held-out errors), for the report
};

struct CostEstimate {
  std::array<double, kProcessors> seconds{};
  double on(Processor p) const { return seconds[std::size_t(p)]; }
};

// One model per processor.
class CostPredictor {
 public:
  // Fits each processor's model on the samples but every fourth, reports the mean relative
  // error on the held-out fourth (`report`: per processor, samples, held-out error, weights),
  // then refits on every sample for use.
  static CostPredictor train(std::span<const CostSample> cpu_log,
                             std::span<const CostSample> gpu_log, nlohmann::json* report,
                             CostModelKind kind = CostModelKind::kBest);
  CostEstimate predict(const QueryFeatures& f) const;
  const ProcessorCostModel& model(Processor p) const { return models_[std::size_t(p)]; }
  // This predictor with processor p's model replaced (an online refit).
  CostPredictor with_model(Processor p, ProcessorCostModel model) const {
    CostPredictor q = *this;
    q.models_[std::size_t(p)] = std::move(model);
    return q;
  }

 private:
  std::array<ProcessorCostModel, kProcessors> models_;
};

}  // namespace gpusearch
