#include "gpu/device_memory_budget.hpp"

#include <fmt/format.h>

#include "gpu/cuda_util.hpp"

namespace gpusearch::gpu {

std::uint64_t shard_image_bytes(const ShardIndex& shard) {
  const std::uint64_t docs = shard.num_docs();
  // As DeviceShard uploads them: postings, block offsets, block last docIDs and maxima, length
  // norms in double and float, PageRank and GS.
  return shard.postings().size_bytes() + shard.block_offsets().size_bytes() +
         shard.block_last_docid().size_bytes() + shard.block_max_impact().size_bytes() +
         docs * (sizeof(double) + sizeof(float)) + shard.pagerank().size_bytes() +
         shard.global_scores().size_bytes();
}

DeviceMemoryInfo device_memory(int device) {
  ScopedDevice on(device);
  std::size_t free_b = 0, total_b = 0;
  GPUSEARCH_CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
  return {free_b, total_b};
}

nlohmann::json DeviceMemoryPlan::to_json() const {
  return {{"device", device},           {"isns_on_device", isns_on_device},
          {"image_bytes", image_bytes}, {"buffer_bytes", buffer_bytes},
          {"free_bytes", free_bytes},   {"total_bytes", total_bytes}};
}

DeviceMemoryPlan check_device_memory(const ShardIndex& shard, int device, unsigned isns_on_device,
                                     std::uint64_t buffer_bytes) {
  DeviceMemoryPlan plan;
  plan.device = device;
  plan.isns_on_device = std::max(1u, isns_on_device);
  plan.image_bytes = shard_image_bytes(shard);
  plan.buffer_bytes = buffer_bytes;
  {
    ScopedDevice on(device);
    std::size_t free_b = 0, total_b = 0;
    GPUSEARCH_CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
    plan.free_bytes = free_b;
    plan.total_bytes = total_b;
  }
  const std::uint64_t need = plan.image_bytes + plan.buffer_bytes;
  const double gib = double(1ull << 30);
  const bool fits_now = need <= plan.free_bytes;
  const bool fits_shared = double(need) * plan.isns_on_device <= 0.95 * double(plan.total_bytes);
  if (!fits_now || !fits_shared)
    throw InputError(
        "GPU memory", 0,
        fmt::format("this shard needs {:.2f} GiB on GPU {} (device image {:.2f} GiB + batch "
                    "buffers {:.2f} GiB){}, but the GPU has {:.2f} GiB free of {:.2f} GiB: cut "
                    "the index into more, smaller shards (gpusearch partition --shards, one ISN "
                    "each, more GPUs: --gpus-per-isn or more nodes), run fewer ISNs per GPU, or "
                    "serve it from the CPU (--engine cpu), or serve it through a GPU list cache "
                    "that holds only part of the lists (--gpu-mem BYTES|FRACTION, README: GPU "
                    "list cache)",
                    need / gib, device, plan.image_bytes / gib, plan.buffer_bytes / gib,
                    plan.isns_on_device > 1
                        ? fmt::format(" for each of the {} ISNs sharing it", plan.isns_on_device)
                        : "",
                    plan.free_bytes / gib, plan.total_bytes / gib));
  return plan;
}

}  // namespace gpusearch::gpu
