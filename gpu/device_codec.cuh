// The index codec (common/block_codec.hpp) decoded on the GPU, one warp per 128-value block:
// lane l unpacks values l, l+32, l+64, l+96 straight from the vertical SIMD-BP128 layout, the
// warp patches PForDelta exceptions, and docID gaps become docIDs through a warp-local prefix
// sum over the block (paper 001, section 6: localized per-block prefix sums, no global pass).
#pragma once

#include <cstdint>

#include <cub/warp/warp_scan.cuh>

#include "common/block_layout.hpp"

namespace gpusearch::gpu {

inline constexpr unsigned kFullMask = 0xffffffffu;
inline constexpr unsigned kValuesPerBlock = kBlockSize;  // common/types.hpp

// The block layout's arithmetic (header, sizes, bit positions) is common/block_layout.hpp's,
// shared with the CPU decoder; blocks are read here from global memory or from a shared-memory
// staging copy with plain loads.
using codec::BlockHeader;
using codec::low_mask;
using codec::packed_words;
using codec::read_header;

__device__ __forceinline__ std::uint32_t load_word(const std::uint32_t* p) { return *p; }

// Unpacks the block at `in` (global memory) into out[0..128) (shared memory, 16-byte aligned):
// out[i] for i below the block's count, 0 past it. Executed by a whole warp. Returns the words
// the block occupies in *words and its value count.
__device__ __forceinline__ unsigned warp_unpack_block(const std::uint32_t* in,
                                                      std::uint32_t* out, unsigned lane,
                                                      unsigned* words) {
  const BlockHeader h = read_header(load_word(in));
  const std::uint32_t* packed = in + 1;
#pragma unroll
  for (unsigned r = 0; r < 4; ++r) {
    const unsigned i = lane + 32 * r;
    out[i] = i < h.count ? codec::packed_value(packed, h, i) : 0u;
  }
  if (h.exceptions != 0) {
    __syncwarp();
    const std::uint32_t* positions = packed + packed_words(h);
    for (unsigned j = lane; j < h.exceptions; j += 32)  // positions are distinct: no conflicts
      out[codec::exception_position(positions, j) & 127u] |=
          codec::exception_high_bits(positions, h, j);
  }
  __syncwarp();
  *words = codec::words_for(h);
  return h.count;
}

// The warp's prefix sum of the lanes' gap totals: hand-written shuffles, or CUB's WarpScan
// (kCubScan; benchmarked side by side in bench_gpu_engine's decode row, checked by the decoder
// test).
template <bool kCubScan = false>
__device__ __forceinline__ std::uint32_t warp_inclusive_scan(std::uint32_t total, unsigned lane) {
  if constexpr (kCubScan) {
    using WarpScan = cub::WarpScan<std::uint32_t>;
    typename WarpScan::TempStorage unused;  // the shuffle specialization keeps nothing in it
    WarpScan(unused).InclusiveSum(total, total);
  } else {
#pragma unroll
    for (unsigned d = 1; d < 32; d <<= 1) {
      const std::uint32_t t = __shfl_up_sync(kFullMask, total, d);
      if (lane >= d) total += t;
    }
  }
  return total;
}

// Decodes the docIDs of the posting block at `in` into out[0..count): out[i] = floor - 1 +
// sum_{j <= i} (gap_j + 1). Returns the count; *freq_part points at the frequency block.
template <bool kCubScan = false>
__device__ __forceinline__ unsigned warp_decode_docids(const std::uint32_t* in,
                                                       std::uint32_t floor, std::uint32_t* out,
                                                       unsigned lane,
                                                       const std::uint32_t** freq_part) {
  unsigned words;
  const unsigned n = warp_unpack_block(in, out, lane, &words);
  *freq_part = in + words;
  // Lane l holds values 4l..4l+3: a local scan, then a warp scan of the lanes' totals.
  uint4 v = reinterpret_cast<const uint4*>(out)[lane];
  v.x += 1;
  v.y += v.x + 1;
  v.z += v.y + 1;
  v.w += v.z + 1;
  const std::uint32_t total = warp_inclusive_scan<kCubScan>(v.w, lane);
  const std::uint32_t base = total - v.w + (floor - 1u);
  v.x += base;
  v.y += base;
  v.z += base;
  v.w += base;
  reinterpret_cast<uint4*>(out)[lane] = v;
  __syncwarp();
  return n;
}

// Decodes the frequencies (tf) of a posting block from its frequency part. Returns the words
// the frequency block occupies.
__device__ __forceinline__ unsigned warp_decode_freqs(const std::uint32_t* freq_part,
                                                      std::uint32_t* out, unsigned lane) {
  unsigned words;
  warp_unpack_block(freq_part, out, lane, &words);
  uint4 v = reinterpret_cast<const uint4*>(out)[lane];
  v.x += 1;
  v.y += 1;
  v.z += 1;
  v.w += 1;
  reinterpret_cast<uint4*>(out)[lane] = v;
  __syncwarp();
  return words;
}

}  // namespace gpusearch::gpu
