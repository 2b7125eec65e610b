// Device helpers over a shard's image (ShardView): block boundaries, block search, one posting
// block decoded by a warp, and a term's score contribution. Shared by every query kernel.
#pragma once

#include <cstdint>

#include "gpu/batch_layout.hpp"
#include "gpu/device_codec.cuh"

namespace gpusearch::gpu {

// A posting block (docID and frequency parts) is at most 2 * (1 + 4 * 32 + 32) words: one
// round of coalesced loads stages it in shared memory before decoding.
inline constexpr unsigned kStageWords = 2 * (1 + 4 * 32 + 32);
inline constexpr std::uint64_t kNoBlock = ~std::uint64_t(0);
inline constexpr std::uint32_t kEndDoc = 0xffffffffu;
// The GS and block-max bounds are inflated by this relative slack before they prune
// (common/scoring.hpp, kBoundSlack): it covers float rounding of the scores they are compared to.
inline constexpr double kBoundSlack = 1e-5;

// impact(d, t) = tf / (tf + norm), and one term's contribution, rounded as on the host.
__device__ __forceinline__ double contribution(double weight, std::uint32_t tf, double norm) {
  const double f = static_cast<double>(tf);
  return __dmul_rn(weight, __ddiv_rn(f, __dadd_rn(f, norm)));
}

// The same in float: about 1e-7 relative, well inside the exactness contract's 1e-5.
__device__ __forceinline__ float contribution_f(float weight, std::uint32_t tf, float norm) {
  const float f = static_cast<float>(tf);
  return weight * __fdividef(f, f + norm);
}

// First docID block b can hold: the previous block's last docID + 1 (0 for a list's first).
__device__ __forceinline__ std::uint32_t block_floor(const ShardView& s, const TermDesc& t,
                                                     std::uint64_t b) {
  return b == t.first_block ? 0u : __ldg(s.block_last_docid + b - 1) + 1u;
}

// First block b in [lo, hi) whose last docID is >= doc; hi if none.
__device__ __forceinline__ std::uint64_t find_block(const std::uint32_t* last, std::uint64_t lo,
                                                    std::uint64_t hi, std::uint32_t doc) {
  while (lo < hi) {
    const std::uint64_t mid = lo + (hi - lo) / 2;
    if (__ldg(last + mid) < doc) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

// First block b >= from whose last docID is >= target (galloping, then binary search): costs
// the log of the distance, so a merge-like walk where the list is about as dense as the probes
// and a binary search where it is much longer.
__device__ __forceinline__ std::uint64_t gallop_block(const ShardView& s, std::uint64_t from,
                                                      std::uint64_t end, std::uint32_t target) {
  if (from >= end || __ldg(s.block_last_docid + from) >= target) return from;
  std::uint64_t lo = from, step = 1;  // last[lo] < target
  while (lo + step < end && __ldg(s.block_last_docid + lo + step) < target) {
    lo += step;
    step <<= 1;
  }
  const std::uint64_t hi = lo + step < end ? lo + step : end;  // last[hi] >= target or hi == end
  return find_block(s.block_last_docid, lo + 1, hi, target);
}

// Decodes posting block b (docIDs from `floor`, and frequencies) into docs/freqs (shared
// memory, 128 words each). The block's words are first staged in shared memory with one round
// of independent coalesced loads, so a block costs one trip to memory instead of four
// dependent ones (header, packed words, then the frequency part's header and words); a kernel
// short of shared memory passes no stage. Executed by a whole warp. Returns the count; *words is the block's size in words.
__device__ __forceinline__ unsigned warp_decode_posting_block(const ShardView& s, std::uint64_t b,
                                                              std::uint32_t floor,
                                                              std::uint32_t* stage,
                                                              std::uint32_t* docs,
                                                              std::uint32_t* freqs, unsigned lane,
                                                              unsigned* words) {
  const std::uint64_t begin = __ldg(s.block_offsets + b), end = __ldg(s.block_offsets + b + 1);
  const unsigned n_words = static_cast<unsigned>(end - begin);
  const std::uint32_t* in = s.postings + begin;
  if (stage != nullptr && n_words <= kStageWords) {  // no stage: decode from global memory
    for (unsigned i = lane; i < n_words; i += 32) stage[i] = __ldg(in + i);
    __syncwarp();
    in = stage;
  }
  const std::uint32_t* freq_part;
  const unsigned n = warp_decode_docids(in, floor, docs, lane, &freq_part);
  warp_decode_freqs(freq_part, freqs, lane);
  *words = n_words;
  return n;
}

// Scores are non-negative, so their IEEE bits order as unsigned integers: a query's running
// lower bound of the k-th score lives in global memory as bits, raised with atomicMax.
__device__ __forceinline__ double load_theta(const unsigned long long* theta) {
  return __longlong_as_double(static_cast<long long>(
      *reinterpret_cast<const volatile unsigned long long*>(theta)));
}
__device__ __forceinline__ void raise_theta(unsigned long long* theta, double kth) {
  if (kth > 0.0) atomicMax(theta, static_cast<unsigned long long>(__double_as_longlong(kth)));
}

}  // namespace gpusearch::gpu
