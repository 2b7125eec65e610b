// A shard's device image: everything the query kernels read, uploaded once when the engine
// starts. Kept apart from the per-batch buffers so that a GPU list cache can later hold only
// some lists (the caching issue) without touching the kernels' view of a batch.
#pragma once

#include <cstdint>

#include <nlohmann/json_fwd.hpp>

#include "common/shard_index.hpp"
#include "gpu/batch_layout.hpp"
#include "gpu/cuda_util.hpp"

namespace gpusearch::gpu {

class DeviceShard {
 public:
  // Uploads `shard` to the current device. Throws CudaError (e.g. out of memory) on failure.
  explicit DeviceShard(const ShardIndex& shard);
  const ShardView& view() const { return view_; }
  std::uint64_t device_bytes() const;
  std::uint64_t num_blocks() const { return block_last_docid_.size(); }
  double upload_seconds() const { return upload_seconds_; }
  nlohmann::json to_json() const;

 private:
  DeviceBuffer<std::uint32_t> postings_;
  DeviceBuffer<std::uint64_t> block_offsets_;
  DeviceBuffer<std::uint32_t> block_last_docid_;
  DeviceBuffer<float> block_max_impact_;
  DeviceBuffer<double> length_norm_;
  DeviceBuffer<float> length_norm_f_;
  DeviceBuffer<float> pagerank_;
  DeviceBuffer<float> global_score_;
  ShardView view_{};
  double upload_seconds_ = 0;
};

}  // namespace gpusearch::gpu
