#include "isn/batch_cost_model.hpp"

#include "isn/least_squares.hpp"

#include <algorithm>
#include <cmath>

namespace gpusearch {

BatchCostModel::BatchCostModel(double half_life_calls, std::uint64_t min_calls)
    : decay_(std::exp2(-1.0 / std::max(1.0, half_life_calls))), min_calls_(min_calls) {}

void BatchCostModel::observe(double queries, double postings, double seconds) {
  if (!(queries > 0) || !(seconds >= 0) || !(postings >= 0)) return;
  const std::array<double, 3> x{1.0, queries, postings};
  for (std::size_t i = 0; i < 3; ++i) {
    for (std::size_t j = 0; j < 3; ++j) xx_[i][j] = decay_ * xx_[i][j] + x[i] * x[j];
    xy_[i] = decay_ * xy_[i] + x[i] * seconds;
  }
  queries_seen_ = decay_ * queries_seen_ + queries;
  seconds_seen_ = decay_ * seconds_seen_ + seconds;
  ++calls_;
  solve();
}

void BatchCostModel::solve() {
  // Ridge on b and c, relative to their diagonal terms, so that collinear calls (equal batches)
  // still give a solution.
  std::array<std::array<double, 4>, 3> m{};
  for (std::size_t i = 0; i < 3; ++i) {
    for (std::size_t j = 0; j < 3; ++j) m[i][j] = xx_[i][j];
    m[i][3] = xy_[i];
  }
  for (std::size_t i = 0; i < 3; ++i) m[i][i] += (i == 0 ? 1e-12 : 1e-6 * xx_[i][i]) + 1e-30;
  beta_ = solve_augmented<3>(m);
  solved_ = std::isfinite(beta_[0]) && std::isfinite(beta_[1]) && std::isfinite(beta_[2]);
}

double BatchCostModel::marginal(double postings) const {
  const double mean = queries_seen_ > 0 ? seconds_seen_ / queries_seen_ : 1e-6;
  const double floor = std::max(1e-12, 0.01 * mean);
  if (!solved_) return mean;
  return std::max(floor, beta_[1] + beta_[2] * std::max(0.0, postings));
}

nlohmann::json BatchCostModel::stats() const {
  return {{"calls", calls_},
          {"ready", ready()},
          {"seconds_per_call", beta_[0]},
          {"seconds_per_query", beta_[1]},
          {"seconds_per_posting", beta_[2]}};
}

}  // namespace gpusearch
