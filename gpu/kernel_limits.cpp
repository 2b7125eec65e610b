#include "gpu/kernel_limits.hpp"

#include <map>
#include <tuple>
#include <mutex>
#include <utility>

#include <fmt/format.h>

#include "gpu/cuda_util.hpp"
#include "gpu/query_kernels.hpp"

namespace gpusearch::gpu {

namespace {

struct Limits {
  std::mutex mutex;
  std::map<int, int> multiprocessors;                            // by device
  std::map<std::pair<int, const void*>, int> dynamic_shared;     // by device and kernel
  std::map<std::tuple<int, const void*, int, std::size_t>, int> resident;  // occupancy
};

Limits& limits() {
  static Limits l;
  return l;
}

int current_device() {
  int device = 0;
  GPUSEARCH_CUDA_CHECK(cudaGetDevice(&device));
  return device;
}

// Largest dynamic shared memory `kernel` may use on `device` (opt-in maximum less its static).
int query_dynamic_limit(int device, const void* kernel) {
  int max_optin = 0;
  GPUSEARCH_CUDA_CHECK(
      cudaDeviceGetAttribute(&max_optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  cudaFuncAttributes attr{};
  GPUSEARCH_CUDA_CHECK(cudaFuncGetAttributes(&attr, kernel));
  return max_optin - static_cast<int>(attr.sharedSizeBytes);
}

}  // namespace

void configure_query_kernels() {
  KernelRegistry registry;
  register_and_kernel(registry);
  register_or_kernel(registry);
  register_or_warp_kernel(registry);
  register_bmw_kernel(registry);
  register_topk_merge_kernel(registry);
  const int device = current_device();
  Limits& l = limits();
  std::lock_guard lock(l.mutex);
  for (const void* kernel : registry.kernels()) {
    if (l.dynamic_shared.count({device, kernel})) continue;
    const int limit = query_dynamic_limit(device, kernel);
    GPUSEARCH_CUDA_CHECK(
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, limit));
    l.dynamic_shared[{device, kernel}] = limit;
  }
  if (!l.multiprocessors.count(device)) {
    int sms = 0;
    GPUSEARCH_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
    l.multiprocessors[device] = sms;
  }
}

int device_multiprocessors() {
  const int device = current_device();
  {
    Limits& l = limits();
    std::lock_guard lock(l.mutex);
    if (auto it = l.multiprocessors.find(device); it != l.multiprocessors.end()) return it->second;
  }
  configure_query_kernels();
  std::lock_guard lock(limits().mutex);
  return limits().multiprocessors.at(device);
}

int resident_blocks(const void* kernel, int threads, std::size_t dynamic_bytes) {
  const int device = current_device();
  const auto key = std::make_tuple(device, kernel, threads, dynamic_bytes);
  {
    Limits& l = limits();
    std::lock_guard lock(l.mutex);
    if (auto it = l.resident.find(key); it != l.resident.end()) return it->second;
  }
  configure_query_kernels();  // the dynamic limits are raised before the calculator runs
  int blocks = 0;
  GPUSEARCH_CUDA_CHECK(
      cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, kernel, threads, dynamic_bytes));
  std::lock_guard lock(limits().mutex);
  limits().resident[key] = blocks;
  return blocks;
}

void check_shared_budget(std::size_t bytes, const void* kernel, const char* name,
                         const char* hint) {
  const int device = current_device();
  int limit = -1;
  {
    Limits& l = limits();
    std::lock_guard lock(l.mutex);
    if (auto it = l.dynamic_shared.find({device, kernel}); it != l.dynamic_shared.end())
      limit = it->second;
  }
  if (limit < 0) {  // not configured on this device yet
    configure_query_kernels();
    std::lock_guard lock(limits().mutex);
    limit = limits().dynamic_shared.at({device, kernel});
  }
  if (bytes > static_cast<std::size_t>(limit))
    throw Error(fmt::format("{} needs {} bytes of shared memory for this batch; the device "
                            "allows {}: {}",
                            name, bytes, limit, hint));
}

}  // namespace gpusearch::gpu
