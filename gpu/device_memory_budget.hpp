// GPU memory accounting at ISN start-up: what the GPU engine will put on a device (the shard's
// device image, as DeviceShard uploads it, plus an allowance for its batch buffers) against
// the device's memory, shared by the ISNs mapped to it. A shard that cannot fit is refused
// before any upload, with a message naming what to change, instead of an out-of-memory error
// from the middle of an upload. Host-only header (no CUDA header).
#pragma once

#include <cstdint>

#include <nlohmann/json.hpp>

#include "common/shard_index.hpp"

namespace gpusearch::gpu {

// Allowance for one GPU engine's batch buffers (packed queries, segment rows, results, pinned
// staging) at the default launch size: what a batch of 4,096 queries at k = 1000 takes, rounded
// up.
inline constexpr std::uint64_t kBatchBufferAllowanceBytes = 512ull << 20;

// Free and total memory of `device` now. Throws CudaError when it cannot be queried.
struct DeviceMemoryInfo {
  std::uint64_t free_bytes = 0, total_bytes = 0;
};
DeviceMemoryInfo device_memory(int device);

// The bytes DeviceShard allocates for `shard` (postings, block arrays, per-document arrays).
std::uint64_t shard_image_bytes(const ShardIndex& shard);

struct DeviceMemoryPlan {
  int device = 0;
  unsigned isns_on_device = 1;
  std::uint64_t image_bytes = 0, buffer_bytes = 0, free_bytes = 0, total_bytes = 0;
  nlohmann::json to_json() const;
};

// Checks that this ISN's image and buffers fit on `device` beside the images of the other
// isns_on_device - 1 ISNs of its node mapped there (assumed the same size: shards are cut
// evenly): image + buffers <= free memory now, and isns_on_device x (image + buffers) <= 95% of
// the device. Throws InputError naming --isns / gpusearch partition, --gpus-per-isn and
// --engine cpu when it does not fit; CudaError when the device cannot be queried.
DeviceMemoryPlan check_device_memory(const ShardIndex& shard, int device, unsigned isns_on_device,
                                     std::uint64_t buffer_bytes = kBatchBufferAllowanceBytes);

}  // namespace gpusearch::gpu
