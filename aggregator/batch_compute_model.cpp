#include "aggregator/batch_compute_model.hpp"

#include <algorithm>
#include <cmath>
#include <utility>

namespace gpusearch {

namespace {
constexpr double kForget = 0.98;  // per batch: weight halves after ~35 batches
constexpr double kRidge = 1e-7;   // relative to the mean diagonal: a guard against collinear
                                  // features (a constant batch size is the intercept again)
}  // namespace

BatchComputeModel::Vec BatchComputeModel::scaled(const BatchFeatures& f) const {
  const Vec raw{1.0, f.queries, f.shortest_postings, f.postings, f.terms};
  Vec x{};
  for (std::size_t i = 0; i < kFeatures; ++i) x[i] = raw[i] * scale_[i];
  return x;
}

void BatchComputeModel::add(const BatchFeatures& f, double compute_us) {
  if (!std::isfinite(compute_us) || compute_us < 0) return;
  if (samples_ == 0) {
    // Features of very different magnitudes (postings in the millions, terms in the hundreds):
    // scaled to about 1 so that the ridge term treats them alike.
    const Vec raw{1.0, f.queries, f.shortest_postings, f.postings, f.terms};
    for (std::size_t i = 0; i < kFeatures; ++i) scale_[i] = raw[i] > 0 ? 1.0 / raw[i] : 1.0;
  }
  const Vec x = scaled(f);
  for (double& g : gram_) g *= kForget;
  for (double& m : moment_) m *= kForget;
  for (std::size_t i = 0; i < kFeatures; ++i) {
    moment_[i] += x[i] * compute_us;
    for (std::size_t j = 0; j < kFeatures; ++j) gram_[i * kFeatures + j] += x[i] * x[j];
  }
  ++samples_;
  if (samples_ < kMinSamples) return;

  // Solve (gram + ridge I) coef = moment by Gaussian elimination with partial pivoting.
  std::array<double, kFeatures * kFeatures> a = gram_;
  Vec b = moment_;
  double trace = 0;
  for (std::size_t i = 0; i < kFeatures; ++i) trace += a[i * kFeatures + i];
  const double ridge = kRidge * trace / double(kFeatures) + 1e-12;
  for (std::size_t i = 0; i < kFeatures; ++i) a[i * kFeatures + i] += ridge;
  for (std::size_t col = 0; col < kFeatures; ++col) {
    std::size_t pivot = col;
    for (std::size_t r = col + 1; r < kFeatures; ++r)
      if (std::abs(a[r * kFeatures + col]) > std::abs(a[pivot * kFeatures + col])) pivot = r;
    if (std::abs(a[pivot * kFeatures + col]) < 1e-300) return;  // keep the last fit
    if (pivot != col) {
      for (std::size_t j = 0; j < kFeatures; ++j)
        std::swap(a[col * kFeatures + j], a[pivot * kFeatures + j]);
      std::swap(b[col], b[pivot]);
    }
    for (std::size_t r = col + 1; r < kFeatures; ++r) {
      const double factor = a[r * kFeatures + col] / a[col * kFeatures + col];
      for (std::size_t j = col; j < kFeatures; ++j) a[r * kFeatures + j] -= factor * a[col * kFeatures + j];
      b[r] -= factor * b[col];
    }
  }
  Vec coef{};
  for (std::size_t i = kFeatures; i-- > 0;) {
    double s = b[i];
    for (std::size_t j = i + 1; j < kFeatures; ++j) s -= a[i * kFeatures + j] * coef[j];
    coef[i] = s / a[i * kFeatures + i];
  }
  for (double c : coef)
    if (!std::isfinite(c)) return;
  coef_ = coef;
  fitted_ = true;
}

double BatchComputeModel::predict(const BatchFeatures& f) const {
  if (!fitted_) return -1;
  const Vec x = scaled(f);
  double y = 0;
  for (std::size_t i = 0; i < kFeatures; ++i) y += coef_[i] * x[i];
  return std::max(0.0, y);
}

}  // namespace gpusearch
