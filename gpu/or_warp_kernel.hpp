// OR with one accumulator window per warp (gpu/or_warp_kernel.cu; algorithm `warp`): for the
// decoded posting layout, k <= 32 and queries of at most 32 terms; other launches take the
// block-window kernel (ranked_or_kernel.cu).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

#include "gpu/query_kernels.hpp"

namespace gpusearch::gpu {

inline constexpr unsigned kOrWarpMaxK = 32;        // a top-k per warp, one entry per lane
inline constexpr unsigned kOrWarpMaxLargeK = 1024;  // above 32: the block's top-k in shared memory
inline constexpr unsigned kOrWarpMaxTerms = 32;     // a list's cursor per lane
inline constexpr unsigned kOrWarpThreads = 256;     // 8 warps a segment

// Dynamic shared memory of a block: per warp, `window` float accumulators, plus the block's
// top-k (its warps' merge rows for k <= 32, the shared top-k above) and counters.
std::size_t or_warp_kernel_shared_bytes(unsigned window, unsigned k);
// OR over batch.or_segments (queries without kOrByThreads), MaxScore-pruned for queries with
// kPruneBlockMax; each segment's top-k into its partial row, as launch_or_kernel writes it. The
// shard's decoded layout, 1 <= batch.k <= kOrWarpMaxLargeK and queries of at most
// kOrWarpMaxTerms terms.
void launch_or_warp_kernel(const ShardView& shard, const BatchPointers& batch, unsigned window,
                           cudaStream_t stream);

}  // namespace gpusearch::gpu
