#include "isn/online_cost_predictor.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

namespace gpusearch {

OnlineCostPredictor::OnlineCostPredictor(CostLog training, CostPredictor first,
                                         std::size_t refit_every, std::size_t window)
    : training_(std::move(training)),
      refit_every_(refit_every),
      window_(std::max<std::size_t>(window, 1)),
      current_(std::make_shared<const CostPredictor>(std::move(first))) {}

CostEstimate OnlineCostPredictor::predict(const QueryFeatures& f) const {
  std::shared_ptr<const CostPredictor> p;
  {
    std::lock_guard lock(mutex_);
    p = current_;
  }
  return p->predict(f);
}

void OnlineCostPredictor::observe(Processor p, const QueryFeatures& f, double seconds) {
  if (p != Processor::kCpu || !(seconds > 0)) return;
  std::shared_ptr<const CostPredictor> used;
  {
    std::lock_guard lock(mutex_);
    used = current_;
  }
  const double error = std::abs(used->predict(f).on(p) - seconds) / seconds;
  std::vector<CostSample> fit;
  {
    std::lock_guard lock(mutex_);
    ++observed_;
    error_sum_ += error;
    error_sum_since_refit_ += error;
    recent_.push_back({f, seconds, false});
    if (recent_.size() > window_) recent_.pop_front();
    if (refit_every_ == 0 || ++since_refit_ < refit_every_) return;
    last_window_error_ = error_sum_since_refit_ / double(since_refit_);
    since_refit_ = 0;
    error_sum_since_refit_ = 0;
    fit = training_.samples[std::size_t(Processor::kCpu)];
    fit.insert(fit.end(), recent_.begin(), recent_.end());
  }
  // Fitted outside the lock: the scheduler's classifications go on meanwhile.
  auto next = std::make_shared<const CostPredictor>(
      used->with_model(Processor::kCpu, used->model(Processor::kCpu).refit(fit)));
  std::lock_guard lock(mutex_);
  current_ = std::move(next);
  ++refits_;
}

nlohmann::json OnlineCostPredictor::stats() const {
  std::lock_guard lock(mutex_);
  return {
      {"refit_every", refit_every_},
      {"window", window_},
      {"cpu_costs_observed", observed_},
      {"refits", refits_},
      {"cpu_mean_relative_error_online", observed_ ? error_sum_ / double(observed_) : std::nan("")},
      {"cpu_mean_relative_error_online_before_last_refit",
       last_window_error_ >= 0 ? last_window_error_ : std::nan("")}};
}

SchedulerEngine::TrainedCosts OnlineCostPredictor::hooks(
    std::shared_ptr<OnlineCostPredictor> predictor) {
  return {[predictor](const QueryFeatures& f) { return predictor->predict(f); },
          [predictor](Processor p, const QueryFeatures& f, double seconds) {
            predictor->observe(p, f, seconds);
          },
          [predictor] { return predictor->stats(); }};
}

}  // namespace gpusearch
