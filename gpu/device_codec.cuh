// The index codec (common/block_codec.hpp) decoded on the GPU, one warp per 128-value block:
// lane l unpacks values l, l+32, l+64, l+96 straight from the vertical SIMD-BP128 layout, the
// warp patches PForDelta exceptions, and docID gaps become docIDs through a warp-local prefix
// sum over the block (paper 001, section 6: localized per-block prefix sums, no global pass).
#pragma once

#include <cstdint>

namespace gpusearch::gpu {

inline constexpr unsigned kFullMask = 0xffffffffu;
inline constexpr unsigned kValuesPerBlock = 128;

// Blocks are decoded from global memory or from a shared-memory staging copy: plain loads.
__device__ __forceinline__ std::uint32_t load_word(const std::uint32_t* p) { return *p; }

__device__ __forceinline__ std::uint32_t low_mask(unsigned bits) {
  return bits >= 32 ? 0xffffffffu : ((1u << bits) - 1u);
}

struct DeviceBlockHeader {
  unsigned bits, exceptions, exception_bits, count;
};

__device__ __forceinline__ DeviceBlockHeader read_block_header(std::uint32_t word) {
  const unsigned n = word >> 24;
  return {word & 0xffu, (word >> 8) & 0xffu, (word >> 16) & 0xffu, n == 0 ? kValuesPerBlock : n};
}

__device__ __forceinline__ unsigned packed_words(const DeviceBlockHeader& h) {
  return h.count == kValuesPerBlock ? 4 * h.bits : (h.count * h.bits + 31) / 32;
}

__device__ __forceinline__ unsigned block_words(const DeviceBlockHeader& h) {
  return 1 + packed_words(h) + (h.exceptions + 3) / 4 + (h.exceptions * h.exception_bits + 31) / 32;
}

// Unpacks the block at `in` (global memory) into out[0..128) (shared memory, 16-byte aligned):
// out[i] for i below the block's count, 0 past it. Executed by a whole warp. Returns the words
// the block occupies in *words and its value count.
__device__ __forceinline__ unsigned warp_unpack_block(const std::uint32_t* in,
                                                      std::uint32_t* out, unsigned lane,
                                                      unsigned* words) {
  const DeviceBlockHeader h = read_block_header(load_word(in));
  const std::uint32_t* packed = in + 1;
  const std::uint32_t mask = low_mask(h.bits);
#pragma unroll
  for (unsigned r = 0; r < 4; ++r) {
    const unsigned i = lane + 32 * r;
    std::uint32_t x = 0;
    if (i < h.count && h.bits != 0) {
      unsigned word_index, off;
      if (h.count == kValuesPerBlock) {  // vertical: lane word j of lane i % 4 at 4 * j + i % 4
        const unsigned pos = (i >> 2) * h.bits;
        word_index = 4 * (pos >> 5) + (i & 3u);
        off = pos & 31u;
        x = load_word(packed + word_index) >> off;
        if (off + h.bits > 32) x |= load_word(packed + word_index + 4) << (32 - off);
      } else {  // horizontal: value i at bit i * bits
        const unsigned pos = i * h.bits;
        word_index = pos >> 5;
        off = pos & 31u;
        x = load_word(packed + word_index) >> off;
        if (off + h.bits > 32) x |= load_word(packed + word_index + 1) << (32 - off);
      }
      x &= mask;
    }
    out[i] = x;
  }
  if (h.exceptions != 0) {
    __syncwarp();
    const std::uint32_t* positions = packed + packed_words(h);
    const std::uint32_t* high = positions + (h.exceptions + 3) / 4;
    const unsigned eb = h.exception_bits;
    for (unsigned j = lane; j < h.exceptions; j += 32) {
      const unsigned p = (load_word(positions + j / 4) >> (8 * (j % 4))) & 0xffu;
      const unsigned bitpos = j * eb, w = bitpos >> 5, off = bitpos & 31u;
      std::uint32_t x = load_word(high + w) >> off;
      if (off + eb > 32) x |= load_word(high + w + 1) << (32 - off);
      out[p & 127u] |= (x & low_mask(eb)) << h.bits;  // positions are distinct: no conflicts
    }
  }
  __syncwarp();
  *words = block_words(h);
  return h.count;
}

// Decodes the docIDs of the posting block at `in` into out[0..count): out[i] = floor - 1 +
// sum_{j <= i} (gap_j + 1). Returns the count; *freq_part points at the frequency block.
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
  std::uint32_t total = v.w;
#pragma unroll
  for (unsigned d = 1; d < 32; d <<= 1) {
    const std::uint32_t t = __shfl_up_sync(kFullMask, total, d);
    if (lane >= d) total += t;
  }
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
