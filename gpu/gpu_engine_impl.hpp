// The GPU engine's private state (gpu_engine.cpp runs the pipeline, gpu_engine_setup.cpp builds
// the engine and reports its figures): the lanes a call's launches rotate over, and Impl.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <memory>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/kth_impact_table.hpp"
#include "common/online_cache_policy.hpp"
#include "gpu/cuda_util.hpp"
#include "gpu/device_list_cache.hpp"
#include "gpu/device_shard.hpp"
#include "gpu/gpu_engine.hpp"
#include "gpu/post_processing.hpp"

namespace gpusearch::gpu {

inline double ms_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t).count();
}

// One of the pipelines (GpuEngine::Impl::lanes): its stream, its pinned and device buffers, the batch it carries.
struct Lane {
  CudaStream stream;
  PinnedBuffer<std::byte> host_in, host_out;
  DeviceBuffer<std::byte> dev_in, dev_out, dev_scratch;
  CudaEvent start, after_h2d, after_kernels, after_d2h;
  std::vector<std::size_t> query_index;  // positions in the caller's span
  std::vector<DocId> horizon;            // list cache: per slot, [0, horizon) was processed
  std::size_t out_bytes = 0, in_bytes = 0;
  GpuBatchStats stats;
  bool pending = false;
};

struct GpuEngine::Impl {
  const ShardIndex& shard;
  std::uint32_t shard_id;
  GpuEngineOptions options;
  int device = 0;
  int multiprocessors = 1;
  std::unique_ptr<DeviceShard> image;       // the whole shard, or
  std::unique_ptr<DeviceListCache> cache;  // the list cache (options.list_cache)
  std::unique_ptr<KthImpactTable> seeds;   // OR threshold seeds (options.threshold_seed)
  // Launches rotate over the lanes: while one lane's kernels run, the others' results are
  // copied back and unpacked and the next launch is packed. Three, so that a long launch (cost
  // order puts the longest queries first) does not hold the launch after next until its own
  // results are unpacked; two with the list cache, whose shipping regions are per lane.
  std::array<Lane, 3> lanes;
  CudaEvent call_start;  // the timeline's origin on the device (GpuBatchStats::Timeline)
  std::unique_ptr<QueryEngine> host_engine;
  std::uint64_t calls = 0;
  std::uint32_t doc_begin = 0, doc_end = 0;  // the docID range answered (the shard by default)
  // search_into_device_rows: the call leaves its rows on the device, here.
  bool rows_on_device = false;
  const void* device_rows = nullptr;
  // List cache: post-processing, its counters, the online policy.
  std::unique_ptr<PostProcessingThreads> post;
  GpuEngine::PostProcessor post_processor;
  ListCacheCounters counters;
  std::shared_ptr<OnlineCachePolicy> online;
  std::uint64_t online_max_copy_bytes = ~0ull;
  double post_busy_at_clear = 0;
  nlohmann::json annotations = nlohmann::json::object();
  nlohmann::json online_changes = nlohmann::json::array();

  Impl(const ShardIndex& s, std::uint32_t id, GpuEngineOptions o)
      : shard(s), shard_id(id), options(std::move(o)) {}
};

}  // namespace gpusearch::gpu
