// Device limits the kernel launchers check against, read once per device and kernel rather
// than at every launch (an attribute query per launch costs host time on the serving path).
#pragma once

#include <cstddef>
#include <vector>

namespace gpusearch::gpu {

// The kernels whose dynamic shared memory is raised to the device's maximum.
class KernelRegistry {
 public:
  void add(const void* kernel) { kernels_.push_back(kernel); }
  const std::vector<const void*>& kernels() const { return kernels_; }

 private:
  std::vector<const void*> kernels_;
};

void register_and_kernel(KernelRegistry& registry);
void register_or_kernel(KernelRegistry& registry);
void register_or_warp_kernel(KernelRegistry& registry);
void register_bmw_kernel(KernelRegistry& registry);
void register_topk_merge_kernel(KernelRegistry& registry);

// Multiprocessors of the current device (cached).
int device_multiprocessors();
// Blocks of `kernel` that fit on one multiprocessor of the current device with `threads`
// threads and `dynamic_bytes` of dynamic shared memory (the occupancy calculator, cached).
int resident_blocks(const void* kernel, int threads, std::size_t dynamic_bytes);
// Throws Error naming the kernel when `bytes` of dynamic shared memory exceed what it may use
// on the current device (cached after configure_query_kernels()).
void check_shared_budget(std::size_t bytes, const void* kernel, const char* name,
                         const char* hint);

}  // namespace gpusearch::gpu
