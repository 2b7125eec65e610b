// The OR kernel's accumulation of one posting block into a window's shared-memory
// accumulators (gpu/ranked_or_kernel.cu): from a block the warp decoded (compressed layout) or
// from the decoded layout's docIDs and impacts. Executed by a whole warp.
#pragma once

#include <cfloat>
#include <cstdint>

#include "gpu/shard_access.cuh"

namespace gpusearch::gpu {

// Adds one block's contributions (dv: docIDs, kEndDoc where a lane has no posting to add; cv:
// contributions) to the window's accumulators. Essential blocks mark their documents as
// candidates (bitmap) and report the smallest docID at or past hi (where the next window may
// start); non-essential blocks add only to candidates (their callers leave the others out).
template <bool kEssential>
__device__ __forceinline__ void add_contributions(const std::uint32_t (&dv)[4], const float (&cv)[4],
                                                  std::uint32_t lo, std::uint32_t hi, float* acc,
                                                  std::uint32_t* bitmap, std::uint32_t* next_lo) {
  std::uint32_t next_here = kEndDoc;
#pragma unroll
  for (unsigned r = 0; r < 4; ++r) {
    const std::uint32_t d = dv[r];
    const bool in_window = d >= lo && d < hi;
    if (kEssential && d >= hi && d != kEndDoc && d < next_here) next_here = d;
    if (!kEssential) {
      if (in_window) atomicAdd(acc + (d - lo), cv[r]);
      continue;
    }
    if (in_window) {
      // Never add zero, so that "was zero" means "first touch": only the first sets the
      // document's candidate bit (FLT_MIN is far below the contract's tolerance of any score).
      const unsigned slot = d - lo;
      const float old = atomicAdd(acc + slot, fmaxf(cv[r], FLT_MIN));
      if (old == 0.0f) atomicOr(bitmap + (slot >> 5), 1u << (slot & 31u));
    }
  }
  if (kEssential) {
    for (unsigned d = 16; d > 0; d >>= 1)
      next_here = min(next_here, __shfl_xor_sync(kFullMask, next_here, d));
    if ((threadIdx.x & 31u) == 0 && next_here != kEndDoc) atomicMin(next_lo, next_here);
  }
}

// A block the warp decoded into docs / freqs (shared memory): every lane first gathers its four
// postings' norms, so that the loads are in flight together; then the accumulators are updated.
template <bool kEssential>
__device__ __forceinline__ void accumulate_block(const ShardView& shard, const std::uint32_t* docs,
                                                 const std::uint32_t* freqs, unsigned n, float w,
                                                 std::uint32_t lo, std::uint32_t hi, float* acc,
                                                 std::uint32_t* bitmap, std::uint32_t* next_lo,
                                                 unsigned lane) {
  std::uint32_t dv[4];
  float cv[4];
#pragma unroll
  for (unsigned r = 0; r < 4; ++r) {
    const unsigned i = 32 * r + lane;
    dv[r] = i < n ? docs[i] : kEndDoc;
    cv[r] = 0.0f;
    bool wanted = dv[r] >= lo && dv[r] < hi;
    if (!kEssential && wanted) {
      const unsigned slot = dv[r] - lo;
      wanted = (bitmap[slot >> 5] >> (slot & 31u)) & 1u;
      if (!wanted) dv[r] = kEndDoc;
    }
    if (wanted) cv[r] = contribution_f(w, freqs[i], __ldg(shard.length_norm_f + dv[r]));
  }
  add_contributions<kEssential>(dv, cv, lo, hi, acc, bitmap, next_lo);
}

// The same from the decoded layout (postings [p0, p0 + n) of decoded_docs / decoded_impacts):
// no decode, no norm gather. An essential block's docIDs and impacts are loaded together; a
// non-essential block's impacts only for candidates. Returns the bytes this lane read.
template <bool kEssential>
__device__ __forceinline__ unsigned accumulate_decoded_block(const ShardView& shard,
                                                             std::uint64_t p0, unsigned n, float w,
                                                             std::uint32_t lo, std::uint32_t hi,
                                                             float* acc, std::uint32_t* bitmap,
                                                             std::uint32_t* next_lo,
                                                             unsigned lane) {
  std::uint32_t dv[4];
  float cv[4];
  unsigned bytes = 0;
#pragma unroll
  for (unsigned r = 0; r < 4; ++r) {
    const unsigned i = 32 * r + lane;
    const bool here = i < n;
    dv[r] = here ? __ldg(shard.decoded_docs + p0 + i) : kEndDoc;
    cv[r] = kEssential && here ? w * __ldg(shard.decoded_impacts + p0 + i) : 0.0f;
    bytes += here ? (kEssential ? 8u : 4u) : 0u;
  }
  if (!kEssential) {
#pragma unroll
    for (unsigned r = 0; r < 4; ++r) {
      bool wanted = dv[r] >= lo && dv[r] < hi;
      if (wanted) {
        const unsigned slot = dv[r] - lo;
        wanted = (bitmap[slot >> 5] >> (slot & 31u)) & 1u;
      }
      if (wanted) {
        cv[r] = w * __ldg(shard.decoded_impacts + p0 + 32 * r + lane);
        bytes += 4;
      } else {
        dv[r] = kEndDoc;
      }
    }
  }
  add_contributions<kEssential>(dv, cv, lo, hi, acc, bitmap, next_lo);
  return bytes;
}

}  // namespace gpusearch::gpu
