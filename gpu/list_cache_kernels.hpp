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

// One run of posting words to move within the pool: pool[dst, dst + words) = from[src, ...).
// Every table entry of slots [first_slot, first_slot + slots) gets delta added (mod 2^64), one
// thread block per shift (common/list_cache.hpp's TableShift, read as three words).
void launch_shift_offsets(std::uint64_t* table, const std::uint64_t* shifts, std::uint64_t count,
                          cudaStream_t stream);

struct WordMove {
  std::uint64_t src = 0, dst = 0, words = 0;
};
// Every move of `moves` (device memory), one thread block each.
void launch_move_words(std::uint32_t* pool, const std::uint32_t* from, const WordMove* moves,
                       std::uint64_t count, cudaStream_t stream);

}  // namespace gpusearch::gpu
