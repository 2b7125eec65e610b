// OR with one accumulator window per warp (gpu/or_warp_kernel.cu; algorithm `warp`): for the
// decoded posting layout, k <= 32 and queries of at most 32 terms; other launches take the
// block-window kernel (ranked_or_kernel.cu).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

#include "gpu/query_kernels.hpp"

namespace gpusearch::gpu {

inline constexpr unsigned kOrWarpMaxK = 32;      // a warp's top-k: one entry per lane
inline constexpr unsigned kOrWarpMaxTerms = 32;  // a list's cursor per lane
inline constexpr unsigned kOrWarpThreads = 256;  // the engine's block size (8 warps)

// Dynamic shared memory of a block: per warp, `window` float accumulators, plus the block's
// top-k merge rows and counters.
std::size_t or_warp_kernel_shared_bytes(unsigned window, unsigned threads);
// OR over batch.or_segments (queries without kOrByThreads), no list pruned; each segment's
// top-k into its partial row, as launch_or_kernel writes it. The shard's decoded layout,
// batch.k <= kOrWarpMaxK and queries of at most kOrWarpMaxTerms terms. threads: 128 or 256.
void launch_or_warp_kernel(const ShardView& shard, const BatchPointers& batch, unsigned window,
                           unsigned threads, cudaStream_t stream);

}  // namespace gpusearch::gpu
