// Exact top-k of one query inside one thread block, for k up to a few thousand: the running
// top-k and a buffer of newcomers live in shared memory; a newcomer enters the buffer only if it
// beats the current k-th (score descending, then docID ascending, which within a shard is the
// collection-wide rank order); when the buffer fills, top-k and buffer are sorted together by a
// bitonic network and cut back to k.
#pragma once

#include <cstdint>

namespace gpusearch::gpu {

struct TopKState {
  unsigned n_top;  // entries [0, n_top) are the running top-k, best first
  unsigned n_buf;  // entries [n_top, n_top + n_buf) are newcomers
  unsigned k;
  unsigned full;
  double threshold_score;  // the k-th once full
  std::uint32_t threshold_doc;
};

__device__ __forceinline__ bool ranks_before(double s, std::uint32_t d, double ts,
                                             std::uint32_t td) {
  return s > ts || (s == ts && d < td);
}

__device__ __forceinline__ void topk_init(TopKState& st, unsigned k) {
  if (threadIdx.x == 0) {
    st.n_top = 0;
    st.n_buf = 0;
    st.k = k;
    st.full = 0;
    st.threshold_score = 0;
    st.threshold_doc = 0;
  }
}

// Whether (s, d) could enter the top-k now.
__device__ __forceinline__ bool topk_admits(const TopKState& st, double s, std::uint32_t d) {
  return !st.full || ranks_before(s, d, st.threshold_score, st.threshold_doc);
}

// One compare-exchange stage of a bitonic sort of [0, size), best first: pairs first, first +
// step, ... < size / 2 (a block's threads or a warp's lanes). The caller synchronises between
// stages.
__device__ __forceinline__ void bitonic_stage(double* score, std::uint32_t* doc, unsigned size,
                                              unsigned span, unsigned stride, unsigned first,
                                              unsigned step) {
  for (unsigned i = first; i < size / 2; i += step) {
    const unsigned lo = 2 * i - (i & (stride - 1)), hi = lo + stride;
    const bool best_first = (lo & span) == 0;
    if (ranks_before(score[hi], doc[hi], score[lo], doc[lo]) == best_first) {
      const double s = score[lo];
      score[lo] = score[hi];
      score[hi] = s;
      const std::uint32_t d = doc[lo];
      doc[lo] = doc[hi];
      doc[hi] = d;
    }
  }
}

// One thread offers one document. The caller guarantees buffer room (see topk_maybe_flush).
__device__ __forceinline__ void topk_offer(TopKState& st, double* score, std::uint32_t* doc,
                                           double s, std::uint32_t d) {
  if (!topk_admits(st, s, d)) return;
  const unsigned slot = st.n_top + atomicAdd(&st.n_buf, 1u);
  score[slot] = s;
  doc[slot] = d;
}

// Collective: merges the buffer into the top-k. Every thread of the block must call it.
__device__ inline void topk_flush(TopKState& st, double* score, std::uint32_t* doc) {
  __syncthreads();
  const unsigned total = st.n_top + st.n_buf;
  if (st.n_buf == 0) return;
  unsigned size = 1;
  while (size < total) size <<= 1;
  for (unsigned i = total + threadIdx.x; i < size; i += blockDim.x) {
    score[i] = -1.0 / 0.0;
    doc[i] = 0xffffffffu;
  }
  __syncthreads();
  // Bitonic sort, best first.
  for (unsigned span = 2; span <= size; span <<= 1) {
    for (unsigned stride = span >> 1; stride > 0; stride >>= 1) {
      bitonic_stage(score, doc, size, span, stride, threadIdx.x, blockDim.x);
      __syncthreads();
    }
  }
  if (threadIdx.x == 0) {
    st.n_top = total < st.k ? total : st.k;
    st.n_buf = 0;
    if (st.k > 0 && st.n_top == st.k) {
      st.full = 1;
      st.threshold_score = score[st.k - 1];
      st.threshold_doc = doc[st.k - 1];
    }
  }
  __syncthreads();
}

// Collective: flushes when another round of one offer per thread might not fit in the buffer.
// Thread 0 decides for the block once every offer of the round is in (the first barrier), and
// the decision comes back through the second: were each thread to read n_buf itself, a fast
// thread's next offers could raise it before a slow thread reads it, and the block would split
// at the flush's barriers (seen with compute-sanitizer synccheck in the merge kernel at k = 1000).
__device__ __forceinline__ void topk_maybe_flush(TopKState& st, double* score, std::uint32_t* doc,
                                                 unsigned buffer_capacity) {
  __syncthreads();
  if (__syncthreads_or(threadIdx.x == 0 && st.n_buf + blockDim.x > buffer_capacity))
    topk_flush(st, score, doc);
}

}  // namespace gpusearch::gpu
