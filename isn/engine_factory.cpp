#include "isn/engine_factory.hpp"

#include <algorithm>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "common/reference_engine.hpp"
#include "isn/cpu_engine/cpu_engine.hpp"
#if defined(GPUSEARCH_HAVE_CUDA)
#include "gpu/device_memory_budget.hpp"
#include "gpu/gpu_engine.hpp"
#include "gpu/multi_gpu_engine.hpp"
#endif

namespace gpusearch {

std::vector<std::string> engine_names() {
  std::vector<std::string> names{"reference", "cpu", "auto"};
#if defined(GPUSEARCH_HAVE_CUDA)
  names.push_back("gpu");
#endif
  return names;
}

int gpu_device_count() {
#if defined(GPUSEARCH_HAVE_CUDA)
  return gpu::gpu_device_count();
#else
  return 0;
#endif
}

nlohmann::json check_gpu_memory(const ShardIndex& shard, int device, unsigned isns_on_device) {
#if defined(GPUSEARCH_HAVE_CUDA)
  return gpu::check_device_memory(shard, std::max(0, device), isns_on_device).to_json();
#else
  (void)shard, (void)device, (void)isns_on_device;
  return nlohmann::json::object();
#endif
}

std::string resolve_engine_name(const std::string& name) {
  if (name != "auto") return name;
#if defined(GPUSEARCH_HAVE_CUDA)
  if (gpu::gpu_available()) return "gpu";
#endif
  return "cpu";
}

std::unique_ptr<QueryEngine> make_engine(const EngineOptions& requested, const ShardIndex& shard,
                                         std::uint32_t shard_id) {
  EngineOptions options = requested;
  if (options.gpu_split != "ranges" && options.gpu_split != "queries")
    throw InputError("--gpu-split", 0,
                     fmt::format("unknown '{}' (ranges: docID ranges merged through NCCL; "
                                 "queries: each GPU a share of the queries)",
                                 options.gpu_split));
  options.engine = resolve_engine_name(options.engine);
  if (options.engine == "reference") return std::make_unique<ReferenceEngine>(shard, shard_id);
  if (options.engine == "cpu") {
    cpu::CpuEngineOptions o;
    o.algorithm = cpu::parse_algorithm(options.algorithm);
    o.intra_query_threads = options.intra_query_threads;
    o.shared_threshold_refresh = options.shared_threshold_refresh;
    o.sharing_and_phases_first = options.sharing_and_phases_first;
    o.sharing_in_batch_order = options.sharing_in_batch_order;
    return std::make_unique<cpu::CpuEngine>(shard, shard_id, o);
  }
  if (options.engine == "gpu" && options.list_cache.enabled())
    return make_list_cache_gpu_engine(options, shard, shard_id);
  if (options.engine == "gpu") {
#if defined(GPUSEARCH_HAVE_CUDA)
    gpu::GpuEngineOptions g;
    g.device = options.gpu_device;
    g.algorithm = options.algorithm;
    g.batch_size = options.gpu_batch_size;
    g.or_window = options.gpu_or_window;
    g.or_warp_window = options.gpu_or_warp_window;
    g.bmw_threads = options.gpu_bmw_threads;
    g.blocks_per_sm = options.gpu_blocks_per_sm;
    g.posting_layout = options.gpu_posting_layout;
    g.max_segments_per_query = options.gpu_max_segments;
    g.inject_fault_at_call = options.gpu_inject_fault_at_call;
    if (options.gpus > 1 || options.gpu_range_engine) {
      const int present = gpu::gpu_device_count();
      const int first = std::max(0, options.gpu_device);
      std::vector<int> devices;
      for (unsigned i = 0; i < options.gpus; ++i) devices.push_back((first + int(i)) % std::max(1, present));
      auto engine = std::make_unique<gpu::MultiGpuEngine>(
          shard, shard_id, devices, g,
          options.gpu_split == "queries" ? gpu::MultiGpuSplit::kQueries
                                         : gpu::MultiGpuSplit::kDocRanges);
      engine->set_host_engine(
          std::make_unique<cpu::CpuEngine>(shard, shard_id, cpu::CpuEngineOptions{}));
      return engine;
    }
    auto engine = std::make_unique<gpu::GpuEngine>(shard, shard_id, g);
    // Queries longer than the kernels take go to the CPU engine, not the slow reference.
    engine->set_host_engine(std::make_unique<cpu::CpuEngine>(shard, shard_id, cpu::CpuEngineOptions{}));
    return engine;
#else
    throw InputError("--engine", 0, "this build has no GPU engine (configured without CUDA)");
#endif
  }
  throw InputError("--engine", 0, fmt::format("unknown engine '{}' ({})", options.engine,
                                              fmt::join(engine_names(), ", ")));
}

}  // namespace gpusearch
