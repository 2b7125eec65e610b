// Every posting block of a range decoded, one warp per block, with the same warp decoder the
// query kernels fuse in (device_codec.cuh): the decoding benchmark (checksums, nothing written
// per posting) and the decoder's element-by-element test against the CPU decoder (values).
#include "gpu/cuda_util.hpp"
#include "gpu/kernel_limits.hpp"
#include "gpu/query_kernels.hpp"
#include "gpu/shard_access.cuh"

namespace gpusearch::gpu {

namespace {

constexpr unsigned kDecodeThreads = 256;
constexpr unsigned kWarps = kDecodeThreads / 32;

template <bool kCubScan>
__global__ void __launch_bounds__(kDecodeThreads)
    decode_blocks_kernel(ShardView shard, std::uint64_t first, std::uint64_t count,
                         std::uint32_t* docs_out, std::uint32_t* freqs_out,
                         std::uint32_t* checksums) {
  __shared__ __align__(16) std::uint32_t docs[kWarps][kValuesPerBlock];
  __shared__ __align__(16) std::uint32_t freqs[kWarps][kValuesPerBlock];
  const unsigned lane = threadIdx.x & 31u, warp = threadIdx.x >> 5;
  const std::uint64_t stride = std::uint64_t(gridDim.x) * kWarps;
  for (std::uint64_t i = std::uint64_t(blockIdx.x) * kWarps + warp; i < count; i += stride) {
    const std::uint64_t b = first + i;
    const std::uint32_t* in = shard.postings + shard.block_offsets[b];
    const std::uint32_t* freq_part;
    // Floor 0: docIDs are the gaps' prefix sums relative to the block start.
    const unsigned n = warp_decode_docids<kCubScan>(in, 0, docs[warp], lane, &freq_part);
    warp_decode_freqs(freq_part, freqs[warp], lane);
    if (docs_out) {
      for (unsigned j = lane; j < kValuesPerBlock; j += 32) {
        docs_out[i * kValuesPerBlock + j] = j < n ? docs[warp][j] : 0u;
        freqs_out[i * kValuesPerBlock + j] = j < n ? freqs[warp][j] : 0u;
      }
    }
    if (checksums) {
      std::uint32_t x = 0;
      for (unsigned j = lane; j < n; j += 32) x ^= docs[warp][j] * 2654435761u + freqs[warp][j];
      for (unsigned d = 16; d > 0; d >>= 1) x ^= __shfl_xor_sync(kFullMask, x, d);
      if (lane == 0) checksums[i] = x;
    }
    __syncwarp();
  }
}

}  // namespace

void launch_decode_blocks(const ShardView& shard, std::uint64_t first_block, std::uint64_t count,
                          std::uint32_t* docs, std::uint32_t* freqs, std::uint32_t* checksums,
                          cudaStream_t stream, DecodeScan scan) {
  if (count == 0) return;
  if ((docs == nullptr) != (freqs == nullptr))
    throw Error("launch_decode_blocks: docs and freqs go together");
  const std::uint64_t sms = static_cast<std::uint64_t>(device_multiprocessors());
  const std::uint64_t blocks_needed = (count + kWarps - 1) / kWarps;
  const unsigned grid = static_cast<unsigned>(blocks_needed < sms * 16 ? blocks_needed : sms * 16);
  if (scan == DecodeScan::kCub)
    decode_blocks_kernel<true><<<grid, kDecodeThreads, 0, stream>>>(shard, first_block, count, docs,
                                                                    freqs, checksums);
  else
    decode_blocks_kernel<false><<<grid, kDecodeThreads, 0, stream>>>(shard, first_block, count,
                                                                     docs, freqs, checksums);
  GPUSEARCH_CUDA_CHECK_LAUNCH("decode_blocks_kernel");
}

}  // namespace gpusearch::gpu
