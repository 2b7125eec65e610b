// The small linear systems of the cost models' least-squares fits (isn/cost_predictor.cpp's
// CostModel, isn/batch_cost_model.cpp's BatchCostModel): normal equations, a handful of unknowns.
#pragma once

#include <array>
#include <cmath>
#include <cstddef>
#include <utility>

namespace gpusearch {

// Solves the N x N system held augmented in `a` ([A | b], modified in place) by Gauss-Jordan
// elimination with partial pivoting. A column left without a pivot (|pivot| < 1e-300: a feature
// that never varies, where no ridge keeps it) gets 0.
template <std::size_t N>
std::array<double, N> solve_augmented(std::array<std::array<double, N + 1>, N>& a) {
  for (std::size_t c = 0; c < N; ++c) {
    std::size_t pivot = c;
    for (std::size_t r = c + 1; r < N; ++r)
      if (std::abs(a[r][c]) > std::abs(a[pivot][c])) pivot = r;
    std::swap(a[c], a[pivot]);
    if (std::abs(a[c][c]) < 1e-300) continue;  // a dead column: its weight stays 0
    for (std::size_t r = 0; r < N; ++r) {
      if (r == c) continue;
      const double m = a[r][c] / a[c][c];
      for (std::size_t k = c; k <= N; ++k) a[r][k] -= m * a[c][k];
    }
  }
  std::array<double, N> x{};
  for (std::size_t i = 0; i < N; ++i) x[i] = std::abs(a[i][i]) < 1e-300 ? 0.0 : a[i][N] / a[i][i];
  return x;
}

}  // namespace gpusearch
