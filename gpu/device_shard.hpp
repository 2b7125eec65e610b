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

// How the query kernels read postings. Compressed: the index's blocks, decoded by the kernels.
// Decoded: in addition, every posting's docID and impact (8 bytes), which the OR kernel reads
// instead of decoding blocks and gathering length norms (ShardView::decoded_docs).
enum class PostingLayout { kCompressed, kDecoded };

// Device bytes the decoded layout adds to a shard's image.
std::uint64_t decoded_layout_bytes(const ShardIndex& shard);

class DeviceShard {
 public:
  // Uploads `shard` to the current device. Throws CudaError (e.g. out of memory) on failure.
  explicit DeviceShard(const ShardIndex& shard,
                       PostingLayout layout = PostingLayout::kCompressed);
  PostingLayout layout() const { return layout_; }
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
  DeviceBuffer<std::uint32_t> decoded_docs_;
  DeviceBuffer<float> decoded_impacts_;
  DeviceBuffer<std::uint64_t> block_posting_begin_;
  PostingLayout layout_ = PostingLayout::kCompressed;
  double expand_seconds_ = 0;
  ShardView view_{};
  double upload_seconds_ = 0;
};

}  // namespace gpusearch::gpu
