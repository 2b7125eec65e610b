// The shard's decoded posting layout (ShardView::decoded_docs / decoded_impacts), built on the
// device from the compressed image when the engine starts: one warp per block, the query
// kernels' warp decoder, and the impact tf / (tf + norm) in double rounded once to float, as
// the host's impact() computes it (common/scoring.hpp). Built on the device because the host
// would need 8 bytes per posting of memory and a copy of the same size.
#include "gpu/cuda_util.hpp"
#include "gpu/kernel_limits.hpp"
#include "gpu/query_kernels.hpp"
#include "gpu/shard_access.cuh"

namespace gpusearch::gpu {

namespace {

constexpr unsigned kExpandThreads = 256;
constexpr unsigned kExpandWarps = kExpandThreads / 32;

__global__ void __launch_bounds__(kExpandThreads)
    expand_postings_kernel(ShardView shard, const std::uint32_t* block_floors,
                           std::uint64_t num_blocks, std::uint32_t* docs_out, float* impacts_out,
                           unsigned* count_mismatches) {
  __shared__ __align__(16) std::uint32_t docs[kExpandWarps][kValuesPerBlock];
  __shared__ __align__(16) std::uint32_t freqs[kExpandWarps][kValuesPerBlock];
  const unsigned lane = threadIdx.x & 31u, warp = threadIdx.x >> 5;
  const std::uint64_t stride = std::uint64_t(gridDim.x) * kExpandWarps;
  for (std::uint64_t b = std::uint64_t(blockIdx.x) * kExpandWarps + warp; b < num_blocks;
       b += stride) {
    const std::uint64_t begin = shard.block_posting_begin[b];
    const unsigned expected = static_cast<unsigned>(shard.block_posting_begin[b + 1] - begin);
    const std::uint32_t* in = shard.postings + shard.block_offsets[b];
    const std::uint32_t* freq_part;
    const unsigned n = warp_decode_docids(in, block_floors[b], docs[warp], lane, &freq_part);
    warp_decode_freqs(freq_part, freqs[warp], lane);
    if (n != expected) {  // the host's block sizes disagree with the blocks' headers
      if (lane == 0) atomicAdd(count_mismatches, 1u);
      __syncwarp();
      continue;
    }
    for (unsigned j = lane; j < n; j += 32) {
      const std::uint32_t d = docs[warp][j];
      const double f = static_cast<double>(freqs[warp][j]);
      docs_out[begin + j] = d;
      impacts_out[begin + j] =
          __double2float_rn(__ddiv_rn(f, __dadd_rn(f, __ldg(shard.length_norm + d))));
    }
    __syncwarp();  // docs / freqs are rewritten by the warp's next block
  }
}

}  // namespace

void launch_expand_postings(const ShardView& shard, const std::uint32_t* block_floors,
                            std::uint64_t num_blocks, std::uint32_t* docs, float* impacts,
                            unsigned* count_mismatches, cudaStream_t stream) {
  if (num_blocks == 0) return;
  const std::uint64_t sms = static_cast<std::uint64_t>(device_multiprocessors());
  const std::uint64_t needed = (num_blocks + kExpandWarps - 1) / kExpandWarps;
  const unsigned grid = static_cast<unsigned>(needed < sms * 16 ? needed : sms * 16);
  expand_postings_kernel<<<grid, kExpandThreads, 0, stream>>>(shard, block_floors, num_blocks,
                                                              docs, impacts, count_mismatches);
  GPUSEARCH_CUDA_CHECK_LAUNCH("expand_postings_kernel");
}

}  // namespace gpusearch::gpu
