// The slowest ISN's compute time for a batch, predicted from what the aggregator knows before it
// sends the batch (its queries' list lengths), for just-in-time admission (issue 16): a batch
// timed to reach an ISN as it finishes the batch ahead waits behind it by however much that
// batch's compute was underestimated. Batches of 64 queries vary by 3x around their mean
// (measured on the H100 host's CPU engine: p10 1.2 ms, p50 2.1, p90 3.8), so a mean alone left a
// quarter of the batches queued for a millisecond.
//
// The model: ordinary least squares of compute on the batch's features, with exponential
// forgetting (a batch's weight halves every ~35 batches, so a drifting query mix is followed)
// and a tiny ridge term (numerical only); refitted after every batch (a 5x5 solve). It answers only once it has
// seen a few batches; the caller falls back to the mean until then.
#pragma once

#include <array>
#include <cstddef>

namespace gpusearch {

// What a batch asks of the ISNs, summed over its queries.
struct BatchFeatures {
  double queries = 0;
  double shortest_postings = 0;  // each query's shortest list (df): bounds AND's work
  double postings = 0;           // each query's lists' lengths, all terms: bounds OR's work
  double terms = 0;              // one cursor and one block-max walk per term
};

class BatchComputeModel {
 public:
  static constexpr std::size_t kFeatures = 5;  // a constant and the four of BatchFeatures
  static constexpr std::size_t kMinSamples = 8;

  void add(const BatchFeatures& f, double compute_us);
  // Predicted compute in microseconds; a negative value when it cannot predict yet.
  double predict(const BatchFeatures& f) const;
  std::size_t samples() const { return samples_; }

 private:
  using Vec = std::array<double, kFeatures>;
  Vec scaled(const BatchFeatures& f) const;

  std::array<double, kFeatures * kFeatures> gram_{};  // sum of w x x^T (forgetting weights)
  Vec moment_{};                                      // sum of w x y
  Vec scale_{};  // fixed at the first batch: each feature divided by its first value
  Vec coef_{};
  std::size_t samples_ = 0;
  bool fitted_ = false;
};

}  // namespace gpusearch
