#include "isn/ranker/cpu_ranker.hpp"

#include <chrono>

#include <fmt/format.h>
#include <tbb/blocked_range.h>
#include <tbb/enumerable_thread_specific.h>
#include <tbb/parallel_for.h>

#include "common/error.hpp"

namespace gpusearch::ranker {

namespace {

using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

// Documents per task: enough to amortize scheduling, few enough to balance 10,000 documents
// over every core.
constexpr std::size_t kGrain = 16;

class CpuBackend final : public RankerBackend {
 public:
  std::string_view name() const override { return "cpu"; }
  std::unique_ptr<ResidentRanker> make_resident(std::shared_ptr<const CompiledRanker> r) override {
    return std::make_unique<CpuRanker>(std::move(r));
  }
  RankingTimes rank(const ResidentRanker& r, const FeatureBatch& batch,
                    std::span<float> scores) override {
    const auto t0 = Clock::now();
    static_cast<const CpuRanker&>(r).rank(batch, scores);
    RankingTimes t;
    t.total_ms = t.model_ms = ms_since(t0);
    return t;
  }
  RankingTimes score_rows(const ResidentRanker& r, std::span<const float> rows, std::size_t stride,
                          std::span<float> scores) override {
    const auto t0 = Clock::now();
    static_cast<const CpuRanker&>(r).score_rows(rows, stride, scores);
    RankingTimes t;
    t.total_ms = t.model_ms = ms_since(t0);
    return t;
  }
};

}  // namespace

CpuRanker::CpuRanker(std::shared_ptr<const CompiledRanker> ranker) : ranker_(std::move(ranker)) {
  for (const NetLayer& l : ranker_->layers) {
    std::vector<float> t(l.weights.size());
    for (std::uint32_t o = 0; o < l.outputs; ++o)
      for (std::uint32_t i = 0; i < l.inputs; ++i)
        t[std::size_t(i) * l.outputs + o] = l.weights[std::size_t(o) * l.inputs + i];
    weights_t_.push_back(std::move(t));
  }
}

float CpuRanker::score_row(const float* row, Scratch& s) const {
  const CompiledRanker& r = *ranker_;
  // Model inputs (3.4): the transforms in their grouped order.
  s.a.resize(r.transforms.size());
  for (std::size_t i = 0; i < r.transforms.size(); ++i)
    s.a[i] = apply_transform(r.transforms[i], r.nodes.data(), row);
  // The net (3.5.1): h = activation(W x + b), one layer after the other. Sums in double, each
  // rounded to float before its activation: the GPU's double products (cuBLAS) give the same
  // floats whatever their summation order, so the twins agree where float sums would cancel.
  for (std::size_t l = 0; l < r.layers.size(); ++l) {
    const NetLayer& layer = r.layers[l];
    const float* wt = weights_t_[l].data();
    s.b.assign(layer.bias.begin(), layer.bias.end());
    double* out = s.b.data();
    const std::uint32_t n_out = layer.outputs;
    for (std::uint32_t i = 0; i < layer.inputs; ++i) {
      const double x = s.a[i];
      if (x == 0.0) continue;
      const float* col = wt + std::size_t(i) * n_out;
      for (std::uint32_t o = 0; o < n_out; ++o) out[o] += x * double(col[o]);
    }
    s.a.resize(n_out);
    for (std::uint32_t o = 0; o < n_out; ++o) s.a[o] = activate(layer.activation, float(out[o]));
  }
  return s.a[0];
}

void CpuRanker::score_rows(std::span<const float> rows, std::size_t stride,
                           std::span<float> out) const {
  if (stride < ranker_->feature_stride || rows.size() != out.size() * stride)
    throw Error(fmt::format("score_rows: {} floats for {} rows of {} (ranker {} reads {} columns)",
                            rows.size(), out.size(), stride, ranker_->name,
                            ranker_->feature_stride));
  tbb::enumerable_thread_specific<Scratch> scratch;
  tbb::parallel_for(tbb::blocked_range<std::size_t>(0, out.size(), kGrain),
                    [&](const tbb::blocked_range<std::size_t>& range) {
                      Scratch& s = scratch.local();
                      for (std::size_t i = range.begin(); i < range.end(); ++i)
                        out[i] = score_row(rows.data() + i * stride, s);
                    });
}

void CpuRanker::rank(const FeatureBatch& batch, std::span<float> scores) const {
  if (scores.size() != batch.num_docs())
    throw Error(fmt::format("rank: {} scores for {} documents", scores.size(), batch.num_docs()));
  if (ranker_->feature_stride != kFeatureStride)
    throw Error(
        fmt::format("rank: ranker {} is not compiled for feature-extraction rows", ranker_->name));
  tbb::enumerable_thread_specific<Scratch> scratch;
  tbb::parallel_for(tbb::blocked_range<std::size_t>(0, scores.size(), kGrain),
                    [&](const tbb::blocked_range<std::size_t>& range) {
                      Scratch& s = scratch.local();
                      for (std::size_t i = range.begin(); i < range.end(); ++i) {
                        batch.extract(i, s.row);
                        scores[i] = score_row(s.row, s);
                      }
                    });
}

void extract_features(const FeatureBatch& batch, std::span<float> rows) {
  if (rows.size() != batch.num_docs() * kFeatureStride)
    throw Error("extract_features: the output does not hold a row per candidate");
  tbb::parallel_for(tbb::blocked_range<std::size_t>(0, batch.num_docs(), kGrain),
                    [&](const tbb::blocked_range<std::size_t>& range) {
                      for (std::size_t i = range.begin(); i < range.end(); ++i)
                        batch.extract(i, rows.data() + i * kFeatureStride);
                    });
}

std::unique_ptr<RankerBackend> make_cpu_ranker_backend() {
  return std::make_unique<CpuBackend>();
}

}  // namespace gpusearch::ranker
