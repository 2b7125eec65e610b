// The one definition of a compressed block's layout (common/block_codec.hpp describes it): the
// header word, the block's size in words, and where value i's bits and exception j's position
// and high bits sit. Written once for host and device: the CPU decoders, the GPU warp decoder
// (gpu/device_codec.cuh) and the GPU per-thread cursor (gpu/block_max_wand_kernel.cu) all read
// blocks through these functions. No CUDA header is included: under nvcc the functions are
// also __device__, elsewhere they are plain inline C++.
//
// Readers take a `Load` functor (word pointer -> word): plain loads on the CPU and from shared
// memory, __ldg from global memory on the GPU.
#pragma once

#include <cstdint>

#include "common/host_device.hpp"
#include "common/types.hpp"


namespace gpusearch::codec {

struct BlockHeader {
  unsigned bits;
  unsigned exceptions;
  unsigned exception_bits;
  unsigned count;  // values in the block, 1..128
};

struct PlainLoad {
  GPUSEARCH_HOST_DEVICE inline std::uint32_t operator()(const std::uint32_t* p) const { return *p; }
};

GPUSEARCH_HOST_DEVICE inline std::uint32_t low_mask(unsigned bits) {
  return bits >= 32 ? 0xffffffffu : ((1u << bits) - 1u);
}

// header: b | exceptions << 8 | exception_bits << 16 | n << 24 (n = 128 stored as 0).
GPUSEARCH_HOST_DEVICE inline BlockHeader read_header(std::uint32_t word) {
  const unsigned n = word >> 24;
  return {word & 0xffu, (word >> 8) & 0xffu, (word >> 16) & 0xffu, n == 0 ? kBlockSize : n};
}

GPUSEARCH_HOST_DEVICE inline unsigned packed_words(const BlockHeader& h) {
  return h.count == kBlockSize ? 4 * h.bits : (h.count * h.bits + 31) / 32;
}

// Words of the exception positions (one byte each), which follow the packed words.
GPUSEARCH_HOST_DEVICE inline unsigned position_words(const BlockHeader& h) {
  return (h.exceptions + 3) / 4;
}

GPUSEARCH_HOST_DEVICE inline unsigned words_for(const BlockHeader& h) {
  return 1 + packed_words(h) + position_words(h) + (h.exceptions * h.exception_bits + 31) / 32;
}

// The low h.bits bits of value i (i < h.count) from the packed words: full blocks are vertical
// (lane word j of lane i % 4 at 4 * j + i % 4), partial blocks horizontal (value i at bit i * b).
template <typename Load = PlainLoad>
GPUSEARCH_HOST_DEVICE inline std::uint32_t packed_value(const std::uint32_t* packed, const BlockHeader& h,
                                                 unsigned i, Load load = {}) {
  if (h.bits == 0) return 0;
  unsigned word_index, off, next;
  if (h.count == kBlockSize) {
    const unsigned pos = (i >> 2) * h.bits;
    word_index = 4 * (pos >> 5) + (i & 3u);
    off = pos & 31u;
    next = 4;
  } else {
    const unsigned pos = i * h.bits;
    word_index = pos >> 5;
    off = pos & 31u;
    next = 1;
  }
  std::uint32_t x = load(packed + word_index) >> off;
  if (off + h.bits > 32) x |= load(packed + word_index + next) << (32 - off);
  return x & low_mask(h.bits);
}

// Exception j's position in the block (positions ascend), from the words after the packed ones.
template <typename Load = PlainLoad>
GPUSEARCH_HOST_DEVICE inline unsigned exception_position(const std::uint32_t* positions, unsigned j,
                                                  Load load = {}) {
  return (load(positions + j / 4) >> (8 * (j % 4))) & 0xffu;
}

// Exception j's high bits, already shifted above the block's b low bits.
template <typename Load = PlainLoad>
GPUSEARCH_HOST_DEVICE inline std::uint32_t exception_high_bits(const std::uint32_t* positions,
                                                        const BlockHeader& h, unsigned j,
                                                        Load load = {}) {
  const std::uint32_t* high = positions + position_words(h);
  const unsigned eb = h.exception_bits, bitpos = j * eb, w = bitpos >> 5, off = bitpos & 31u;
  std::uint32_t x = load(high + w) >> off;
  if (off + eb > 32) x |= load(high + w + 1) << (32 - off);
  return (x & low_mask(eb)) << h.bits;
}

}  // namespace gpusearch::codec
