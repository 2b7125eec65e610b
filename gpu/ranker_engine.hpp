// The GPU twin of the CPU ranker (paper 004, chapter 3; isn/ranker/cpu_ranker.hpp is the CPU
// side): feature extraction over the candidates' forward-index streams, one warp per document or
// per segment of a long one, every candidate of a request at once (3.3,
// gpu/ranker_features_kernel.cu); the model-input transforms
// and decision trees, one thread per (document, input), every warp one kind of transform (3.4,
// gpu/ranker_transform_kernel.cu); and the net as batched matrix products with cuBLAS (3.5.1,
// gpu/ranker_net.cu). A ranker is uploaded once (3.6: model data stays on the device until the
// ranker cache evicts it); a request (queries, terms, candidates, streams) goes over in one copy,
// the scores come back in one.
//
// No CUDA header here (ARCHITECTURE.md): isn/ includes this file.
#pragma once

#include <cstdint>
#include <memory>
#include <span>

#include <nlohmann/json.hpp>

#include "common/ranker/feature_batch.hpp"
#include "common/ranker/model_layout.hpp"

namespace gpusearch::gpu {

// Where one call's time went. GPU times come from events on the engine's stream.
struct RankerTimings {
  double wall_ms = 0;        // the whole call, host side (packing, copies, kernels, waiting)
  double pack_ms = 0;        // host: the request into pinned memory
  double copy_in_ms = 0;     // request to the device
  double features_ms = 0;    // feature extraction kernel
  double transforms_ms = 0;  // transforms and trees
  double net_ms = 0;         // cuBLAS layers, bias and activation
  double copy_out_ms = 0;    // scores back
  std::uint64_t bytes_in = 0, bytes_out = 0;
  bool streams_resident = false;  // the candidates' streams were on the device already
  std::uint64_t feature_units = 0;      // warps of the feature walk: streams and segments
  std::uint64_t segmented_streams = 0;  // streams cut into segments
  double gpu_ms() const { return copy_in_ms + features_ms + transforms_ms + net_ms + copy_out_ms; }
  double copy_ms() const { return copy_in_ms + copy_out_ms; }
};

// How feature extraction cuts the work: a stream longer than segment_bytes is walked by one warp
// per segment of that size (the longest candidates no longer hold up the launch), and the
// tokens' codes are assembled by shuffles or by re-reading their bytes.
struct FeatureOptions {
  std::uint32_t segment_bytes = 4096;  // at least kMinSegmentBytes
  bool shuffle_decode = true;
  static constexpr std::uint32_t kMinSegmentBytes = 128;  // the first holds the whole head
};

// A ranker's transforms, tree nodes and weights in device memory.
class DeviceRanker {
 public:
  ~DeviceRanker();
  const ranker::CompiledRanker& compiled() const { return *compiled_; }
  std::uint64_t device_bytes() const;
  struct Buffers;  // device memory (gpu/ranker_engine.cpp)
  const Buffers& buffers() const { return *buffers_; }

 private:
  friend class GpuRankerEngine;
  DeviceRanker();
  std::shared_ptr<const ranker::CompiledRanker> compiled_;
  std::unique_ptr<Buffers> buffers_;
};

class GpuRankerEngine {
 public:
  // Owns a stream, a cuBLAS handle, events and the request buffers on `device` (-1: the
  // current one). Throws CudaError when there is no such device.
  explicit GpuRankerEngine(int device = -1);
  ~GpuRankerEngine();
  GpuRankerEngine(const GpuRankerEngine&) = delete;
  GpuRankerEngine& operator=(const GpuRankerEngine&) = delete;

  int device() const;
  // Throws Error for a segment size below FeatureOptions::kMinSegmentBytes.
  void set_feature_options(const FeatureOptions& options);
  const FeatureOptions& feature_options() const;
  // Keeps a copy of [host, host + bytes) (a shard's forward index) on the device: requests whose
  // streams reference it (FeatureBatch::external_streams) then copy no stream bytes. Throws
  // CudaError (keeping nothing) when it does not fit. Requests that reference streams not
  // attached get them gathered into their copy.
  void attach_streams(const std::uint8_t* host, std::size_t bytes);
  bool streams_attached(const std::uint8_t* host, std::size_t bytes) const;
  // Copies the ranker's model data to the device (synchronously).
  std::unique_ptr<DeviceRanker> upload(std::shared_ptr<const ranker::CompiledRanker> ranker);

  // Features, transforms and net for every candidate: scores.size() == batch.num_docs(). The
  // ranker must read catalog rows (feature_stride kFeatureStride).
  RankerTimings rank(const DeviceRanker& ranker, const ranker::FeatureBatch& batch,
                     std::span<float> scores);
  // Transforms and net over feature rows given directly (rows x stride floats).
  RankerTimings score_rows(const DeviceRanker& ranker, std::span<const float> rows,
                           std::size_t stride, std::span<float> scores);
  // The stages alone, for the twin tests: every candidate's feature row (num_docs x
  // kFeatureStride), and every row's model inputs (rows x padded_inputs, grouped order).
  RankerTimings extract_features(const ranker::FeatureBatch& batch, std::span<float> rows);
  void transform_rows(const DeviceRanker& ranker, std::span<const float> rows, std::size_t stride,
                      std::span<float> inputs);

  nlohmann::json stats() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// CUDA devices present (0 without a driver or device; never throws).
int ranker_device_count();

}  // namespace gpusearch::gpu
