// Host entry point of the list cache's kernel (gpu/list_cache_kernels.cu). Plain types only:
// the .cu file sees no host-library headers.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace gpusearch::gpu {

// For each of `count` (slot, word offset) pairs: table[slot] = base + word offset. The pairs are
// common/list_cache.hpp's OffsetPatch entries (two 64-bit words each).
void launch_scatter_offsets(std::uint64_t* table, const std::uint64_t* slot_offset_pairs,
                            std::uint64_t count, std::uint64_t base, cudaStream_t stream);

}  // namespace gpusearch::gpu
