// The CPU twin of the GPU ranker (paper 004's CPU baseline, parallel over documents on all
// cores): per document, feature extraction (common/ranker/document_features.hpp), the model-input
// transforms and trees (common/ranker/model_layout.hpp: the same functions the kernels call), and
// the net, layer by layer. The net's weights are kept transposed, so that a layer adds each
// non-zero input times its weight column (a loop the compiler vectorizes without reassociating
// sums, and that skips the many zero inputs buckets and dummies give).
#pragma once

#include <memory>
#include <span>
#include <vector>

#include "common/ranker/feature_batch.hpp"
#include "isn/ranker/ranker_backend.hpp"

namespace gpusearch::ranker {

class CpuRanker final : public ResidentRanker {
 public:
  explicit CpuRanker(std::shared_ptr<const CompiledRanker> ranker);
  const CompiledRanker& compiled() const override { return *ranker_; }

  // Working memory of one thread.
  struct Scratch {
    std::vector<float> a;   // a layer's inputs
    std::vector<double> b;  // its sums
    float row[kFeatureStride];
  };
  // The model's score of one feature row (feature_stride columns).
  float score_row(const float* row, Scratch& s) const;
  // Every row, in parallel: out[i] = score of rows[i * stride ...].
  void score_rows(std::span<const float> rows, std::size_t stride, std::span<float> out) const;
  // Feature extraction and scoring per candidate, in parallel over candidates.
  void rank(const FeatureBatch& batch, std::span<float> scores) const;

 private:
  std::shared_ptr<const CompiledRanker> ranker_;
  std::vector<std::vector<float>> weights_t_;  // per layer, [inputs][outputs]
};

// Every candidate's feature row (num_docs x kFeatureStride), in parallel.
void extract_features(const FeatureBatch& batch, std::span<float> rows);

}  // namespace gpusearch::ranker
