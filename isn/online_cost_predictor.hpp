// The scheduler's cost predictor refitted online from the scheduler's own logged costs (paper
// 001 trains once, offline). A CPU job runs alone in its engine call, so the CPU worker's time
// for it is that query's cost under the ISN's real load; every `refit_every` such costs the CPU
// model is refitted on the training log plus the newest `window` of them, and the new model
// replaces the old for the queries classified from then on. Before each refit the error of the
// predictions the scheduler actually used is measured on the costs that came in (the online
// error: each prediction made before its query ran). The GPU's costs come per batch, not per
// query: its model stays as trained.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>

#include <nlohmann/json.hpp>

#include "isn/coprocessor_scheduler.hpp"
#include "isn/cost_predictor.hpp"

namespace gpusearch {

class OnlineCostPredictor {
 public:
  // `training`: the log the first predictor was fitted on (kept, so that a refit never forgets
  // the query classes the recent load lacks). refit_every 0: never refit (the online error is
  // still measured).
  OnlineCostPredictor(CostLog training, CostPredictor first, std::size_t refit_every = 512,
                      std::size_t window = 4096);
  CostEstimate predict(const QueryFeatures& f) const;  // thread-safe
  // A job's cost as the scheduler measured it (thread-safe; may refit, inline, in microseconds).
  void observe(Processor p, const QueryFeatures& f, double seconds);
  nlohmann::json stats() const;
  // The scheduler's hooks (SchedulerOptions::estimate, observe), sharing the predictor.
  static SchedulerEngine::TrainedCosts hooks(std::shared_ptr<OnlineCostPredictor> predictor);

 private:
  const CostLog training_;
  const std::size_t refit_every_, window_;
  mutable std::mutex mutex_;
  std::shared_ptr<const CostPredictor> current_;
  std::deque<CostSample> recent_;  // the CPU's newest costs, at most window_
  std::size_t since_refit_ = 0;
  std::uint64_t observed_ = 0, refits_ = 0;
  double error_sum_ = 0, error_sum_since_refit_ = 0;  // |predicted - measured| / measured
  double last_window_error_ = -1;  // the online error over the costs before the last refit
};

}  // namespace gpusearch
