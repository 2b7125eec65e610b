// The evaluators of a compiled ranker behind one interface (the Faiss twin pattern): the CPU twin
// (isn/ranker/cpu_ranker.hpp) and the GPU one (gpu/ranker_engine.hpp, adapted in
// isn/ranker/gpu_ranker_backend.cpp). A ranker is made resident once (the GPU copies its
// transforms, trees and weights to the device, paper 004, 3.6) and then ranks feature-extraction
// batches: features, transforms, model, one score per candidate.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "common/ranker/feature_batch.hpp"
#include "common/ranker/model_layout.hpp"

namespace gpusearch::ranker {

// Where one rank() call spent its time (milliseconds). The GPU fills copy_ms (request to the
// device and scores back) and splits kernels; the CPU fuses the stages per document and reports
// them as compute.
struct RankingTimes {
  double total_ms = 0;
  double copy_ms = 0;
  double features_ms = 0;
  double model_ms = 0;  // transforms, trees and the net
  std::uint64_t bytes_to_device = 0;
  void add(const RankingTimes& o) {
    total_ms += o.total_ms, copy_ms += o.copy_ms, features_ms += o.features_ms,
        model_ms += o.model_ms, bytes_to_device += o.bytes_to_device;
  }
};

class ResidentRanker {
 public:
  virtual ~ResidentRanker() = default;
  virtual const CompiledRanker& compiled() const = 0;
  std::uint64_t bytes() const { return compiled().bytes(); }
};

class RankerBackend {
 public:
  virtual ~RankerBackend() = default;
  virtual std::string_view name() const = 0;
  // Throws gpusearch::Error when the ranker cannot be made resident (e.g. no device memory).
  virtual std::unique_ptr<ResidentRanker> make_resident(
      std::shared_ptr<const CompiledRanker> ranker) = 0;
  // scores.size() == batch.num_docs(). The ranker reads catalog rows (ColumnSpace::kCatalog).
  virtual RankingTimes rank(const ResidentRanker& ranker, const FeatureBatch& batch,
                            std::span<float> scores) = 0;
  // Scores rows of a feature matrix given directly (rows x stride floats, stride >= the
  // ranker's feature_stride): the transforms and the model without feature extraction.
  virtual RankingTimes score_rows(const ResidentRanker& ranker, std::span<const float> rows,
                                  std::size_t stride, std::span<float> scores) = 0;
  // Offers a shard's forward index (mapped, alive as long as the backend): a GPU keeps a copy on
  // the device so that requests referencing it copy no streams. Returns whether it does; a
  // backend that cannot (or need not) says false and requests carry their streams.
  virtual bool attach_streams(std::span<const std::uint8_t> forward_data) { return false; }
  virtual nlohmann::json stats() const { return nlohmann::json::object(); }
};

// The CPU twin on all cores of the process's oneTBB arena.
std::unique_ptr<RankerBackend> make_cpu_ranker_backend();
// "cpu", "gpu" (throws when CUDA is not built in or no device is present) or "auto" (gpu where a
// device is present, else cpu).
std::unique_ptr<RankerBackend> make_ranker_backend(std::string_view which, int gpu_device = -1);

}  // namespace gpusearch::ranker
